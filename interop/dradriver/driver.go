package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// cdiClass is the class part of the CDI device IDs this driver hands out:
// k8s.<driver>/gpu=<claim uid>-<device>.
const cdiClass = "gpu"

// record is one line of the state file.
type record struct {
	Time       string           `json:"time"`
	Op         string           `json:"op"` // prepare, unprepare, registration
	Claim      *claimRef        `json:"claim,omitempty"`
	Devices    []preparedDevice `json:"devices,omitempty"`
	Error      string           `json:"error,omitempty"`
	Registered *bool            `json:"registered,omitempty"`
}

type claimRef struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
}

type preparedDevice struct {
	Request      string   `json:"request"`
	Pool         string   `json:"pool"`
	Device       string   `json:"device"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
}

// driver implements kubeletplugin.DRAPlugin for the devices of one node.
type driver struct {
	name      string
	node      string
	cdiRoot   string
	deviceSet map[string]bool
	unhealthy map[string]bool
	interval  time.Duration
	timeout   time.Duration
	fatal     context.CancelCauseFunc

	mutex    sync.Mutex
	state    *os.File
	prepared map[types.UID][]preparedDevice // what a repeated prepare call answers again
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

func newDriver(c *config, devices []resourceapi.Device, unhealthy []string, fatal context.CancelCauseFunc) (*driver, error) {
	d := &driver{
		name:      c.driverName,
		node:      c.nodeName,
		cdiRoot:   c.cdiRoot,
		deviceSet: map[string]bool{},
		unhealthy: map[string]bool{},
		interval:  c.healthInterval,
		timeout:   c.healthTimeout,
		fatal:     fatal,
		prepared:  map[types.UID][]preparedDevice{},
	}
	for _, device := range devices {
		d.deviceSet[device.Name] = true
	}
	for _, name := range unhealthy {
		d.unhealthy[name] = true
	}
	if c.stateFile != "" {
		file, err := os.OpenFile(c.stateFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
		if err != nil {
			return nil, fmt.Errorf("state file: %w", err)
		}
		d.state = file
	}
	return d, nil
}

func (d *driver) close() {
	if d.state != nil {
		_ = d.state.Close()
	}
}

// record appends one line to the state file; the file is the test's view of what the driver did.
func (d *driver) record(r record) {
	if d.state == nil {
		return
	}
	r.Time = time.Now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(r)
	if err != nil {
		runtime.HandleError(err)
		return
	}
	d.mutex.Lock()
	defer d.mutex.Unlock()
	if _, err := d.state.Write(append(line, '\n')); err != nil {
		runtime.HandleError(fmt.Errorf("write state file: %w", err))
	}
}

func (d *driver) cdiKind() string {
	return "k8s." + d.name + "/" + cdiClass
}

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cdiRoot, d.name+"-"+string(uid)+".json")
}

// PrepareResourceClaims answers with the claim's devices of this driver and their CDI IDs. It is
// idempotent: the answer depends only on the claim's allocation, so a repeated call (also after a
// driver restart) gets the same one.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		ref := &claimRef{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
		if err != nil {
			logger.Error(err, "Preparing a claim failed", "claim", klog.KObj(claim))
			d.record(record{Op: "prepare", Claim: ref, Error: err.Error()})
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		logger.Info("Prepared claim", "claim", klog.KObj(claim), "uid", claim.UID, "devices", devices)
		d.record(record{Op: "prepare", Claim: ref, Devices: devices})
		out := kubeletplugin.PrepareResult{Devices: []kubeletplugin.Device{}}
		for _, device := range devices {
			out.Devices = append(out.Devices, kubeletplugin.Device{
				Requests:     []string{device.Request},
				PoolName:     device.Pool,
				DeviceName:   device.Device,
				CDIDeviceIDs: device.CDIDeviceIDs,
			})
		}
		result[claim.UID] = out
	}
	return result, nil
}

func (d *driver) prepare(claim *resourceapi.ResourceClaim) ([]preparedDevice, error) {
	d.mutex.Lock()
	known, ok := d.prepared[claim.UID]
	d.mutex.Unlock()
	if ok {
		return known, nil
	}
	if claim.Status.Allocation == nil {
		return nil, errors.New("claim is not allocated")
	}
	var devices []preparedDevice
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != d.name {
			continue
		}
		if result.Pool != d.node || !d.deviceSet[result.Device] {
			return nil, fmt.Errorf("device %s/%s is not one of this node's devices", result.Pool, result.Device)
		}
		devices = append(devices, preparedDevice{
			Request:      result.Request,
			Pool:         result.Pool,
			Device:       result.Device,
			CDIDeviceIDs: []string{d.cdiKind() + "=" + string(claim.UID) + "-" + result.Device},
		})
	}
	if d.cdiRoot != "" {
		if err := d.writeSpec(claim.UID, devices); err != nil {
			return nil, err
		}
	}
	d.mutex.Lock()
	d.prepared[claim.UID] = devices
	d.mutex.Unlock()
	return devices, nil
}

// cdiSpec is the subset of a CDI specification (github.com/cncf-tags/container-device-interface)
// this driver writes: one device per allocated device, each setting an environment variable.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string         `json:"name"`
	ContainerEdits cdiContainerEd `json:"containerEdits"`
}

type cdiContainerEd struct {
	Env []string `json:"env"`
}

func (d *driver) writeSpec(uid types.UID, devices []preparedDevice) error {
	spec := cdiSpec{Version: "0.6.0", Kind: d.cdiKind(), Devices: []cdiDevice{}}
	for _, device := range devices {
		spec.Devices = append(spec.Devices, cdiDevice{
			Name:           string(uid) + "-" + device.Device,
			ContainerEdits: cdiContainerEd{Env: []string{fmt.Sprintf("GODRIVER_DEVICE_%s=%s", device.Request, device.Device)}},
		})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	// Written to a temporary name and renamed, so a runtime never reads half a spec.
	path := d.specPath(uid)
	partial := path + ".tmp"
	if err := os.WriteFile(partial, data, 0o644); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	if err := os.Rename(partial, path); err != nil {
		return fmt.Errorf("write CDI spec: %w", err)
	}
	return nil
}

// UnprepareResourceClaims forgets the claims and removes their CDI spec files; a claim that is not
// prepared is not an error (the kubelet may ask again after a restart).
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		ref := &claimRef{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}
		var err error
		if d.cdiRoot != "" {
			if removeErr := os.Remove(d.specPath(claim.UID)); removeErr != nil && !errors.Is(removeErr, os.ErrNotExist) {
				err = fmt.Errorf("remove CDI spec: %w", removeErr)
			}
		}
		if err == nil {
			d.mutex.Lock()
			delete(d.prepared, claim.UID)
			d.mutex.Unlock()
			logger.Info("Unprepared claim", "claim", claim.NamespacedName, "uid", claim.UID)
			d.record(record{Op: "unprepare", Claim: ref})
		} else {
			logger.Error(err, "Unpreparing a claim failed", "claim", claim.NamespacedName)
			d.record(record{Op: "unprepare", Claim: ref, Error: err.Error()})
		}
		result[claim.UID] = err
	}
	return result, nil
}

// HandleError logs what went wrong in the background; a fatal error stops the driver.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.fatal(fmt.Errorf("fatal error: %s: %w", msg, err))
	}
}

// WatchHealthStatus reports every device, Healthy unless --unhealthy names it, at once and then
// every health interval, well inside the timeout the kubelet trusts a report for.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	names := make([]string, 0, len(d.deviceSet))
	for name := range d.deviceSet {
		names = append(names, name)
	}
	slices.Sort(names)
	ticker := time.NewTicker(d.interval)
	defer ticker.Stop()
	for {
		report := kubeletplugin.DeviceHealthReport{}
		now := time.Now()
		for _, name := range names {
			health, message := kubeletplugin.HealthStatusHealthy, ""
			if d.unhealthy[name] {
				health, message = kubeletplugin.HealthStatusUnhealthy, "marked unhealthy by --unhealthy"
			}
			report.Devices = append(report.Devices, kubeletplugin.DeviceHealth{
				PoolName: d.node, DeviceName: name, Health: health, LastUpdated: now, HealthCheckTimeout: d.timeout, Message: message,
			})
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
