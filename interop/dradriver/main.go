// Command dradriver is a minimal DRA driver written the way Go drivers are written: on
// k8s.io/dynamic-resource-allocation/kubeletplugin. It registers with one node's kubelet (here a
// node of the kubelet simulator), publishes that node's devices in a ResourceSlice through the
// library's ResourceSlice controller, prepares and unprepares the claims the kubelet hands it
// (CDI device IDs, optionally CDI spec files) and reports device health. Every prepare and
// unprepare call is appended to --state-file as one JSON line, so tests can count them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type config struct {
	driverName      string
	nodeName        string
	kubeconfig      string
	contentType     string
	qps             float64
	burst           int
	registrarDir    string
	pluginsDir      string
	pluginDataDir   string
	numDevices      int
	cdiRoot         string
	stateFile       string
	unhealthy       string
	healthInterval  time.Duration
	healthTimeout   time.Duration
	grpcVerbosity   int
	serializeCalls  bool
	nodeUIDOverride string
	podUID          string
}

// envOr lets a DaemonSet pass the node-side settings as environment variables, as drivers usually do.
func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func parseFlags() *config {
	c := &config{}
	flag.StringVar(&c.driverName, "driver-name", "godriver.example.com", "the DRA driver name")
	flag.StringVar(&c.nodeName, "node-name", envOr("NODE_NAME", ""), "the node this driver serves (env NODE_NAME)")
	flag.StringVar(&c.kubeconfig, "kubeconfig", envOr("KUBECONFIG", ""), "kubeconfig file; empty: in-cluster config (env KUBECONFIG)")
	flag.StringVar(&c.contentType, "kube-api-content-type", "",
		"content type of API requests (e.g. application/json); empty: client-go's default, protobuf for built-in kinds")
	flag.Float64Var(&c.qps, "kube-api-qps", 5, "client-side QPS limit for API requests")
	flag.IntVar(&c.burst, "kube-api-burst", 10, "client-side burst for API requests")
	flag.StringVar(&c.registrarDir, "kubelet-registrar-directory-path",
		envOr("KUBELET_REGISTRAR_DIRECTORY_PATH", kubeletplugin.KubeletRegistryDir),
		"where the kubelet watches for registration sockets (env KUBELET_REGISTRAR_DIRECTORY_PATH)")
	flag.StringVar(&c.pluginsDir, "kubelet-plugins-directory-path",
		envOr("KUBELET_PLUGINS_DIRECTORY_PATH", kubeletplugin.KubeletPluginsDir),
		"the kubelet's plugins directory; the plugin data directory is <this>/<driver name> (env KUBELET_PLUGINS_DIRECTORY_PATH)")
	flag.StringVar(&c.pluginDataDir, "plugin-data-directory-path", "",
		"where dra.sock is created; default <kubelet-plugins-directory-path>/<driver name>")
	flag.IntVar(&c.numDevices, "num-devices", 4, "devices to publish (gpu-0 .. gpu-N-1)")
	flag.StringVar(&c.cdiRoot, "cdi-root", envOr("CDI_ROOT", ""), "directory for CDI spec files of prepared claims; empty: write none (env CDI_ROOT)")
	flag.StringVar(&c.stateFile, "state-file", "", "append one JSON line per prepare and unprepare call to this file")
	flag.StringVar(&c.unhealthy, "unhealthy", "", "comma-separated devices to report Unhealthy")
	flag.DurationVar(&c.healthInterval, "health-interval", 10*time.Second, "how often the full health report is re-sent")
	flag.DurationVar(&c.healthTimeout, "health-check-timeout", 30*time.Second, "how long the kubelet may trust one health report")
	flag.IntVar(&c.grpcVerbosity, "grpc-verbosity", 4, "klog verbosity at which the helper logs gRPC calls and responses")
	flag.BoolVar(&c.serializeCalls, "serialize", true, "let the helper serialize prepare and unprepare calls")
	flag.StringVar(&c.nodeUIDOverride, "node-uid", "", "the Node's UID, if known; otherwise the ResourceSlice controller looks it up")
	flag.StringVar(&c.podUID, "pod-uid", envOr("POD_UID", ""),
		"the driver pod's UID; when set, the helper supports rolling updates (sockets named after it, calls serialized by a file lock) (env POD_UID)")
	klog.InitFlags(nil)
	flag.Parse()
	return c
}

// restConfig is built as a real driver builds it; only --kube-api-content-type departs from
// client-go's defaults (this project's API server does not read protobuf for every kind yet).
func restConfig(c *config) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, err
	}
	if c.contentType != "" {
		cfg.ContentType = c.contentType
		cfg.AcceptContentTypes = c.contentType
	}
	cfg.QPS = float32(c.qps)
	cfg.Burst = c.burst
	cfg.UserAgent = "dradriver/0.1 " + rest.DefaultKubernetesUserAgent()
	return cfg, nil
}

// devices are GPU-like devices with a few attributes and a capacity, enough to exercise the
// ResourceSlice fields drivers commonly fill in.
func devices(c *config) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, c.numDevices)
	for i := range c.numDevices {
		out = append(out, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index":         {IntValue: ptr.To(int64(i))},
				"model":         {StringValue: ptr.To("sim-gpu")},
				"driverVersion": {VersionValue: ptr.To("1.0.0")},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("16Gi")},
			},
		})
	}
	return out
}

func run(ctx context.Context, c *config) error {
	if c.nodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is required")
	}
	logger := klog.FromContext(ctx)
	cfg, err := restConfig(c)
	if err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("clientset: %w", err)
	}
	dataDir := c.pluginDataDir
	if dataDir == "" {
		dataDir = filepath.Join(c.pluginsDir, c.driverName)
	}
	// Absolute: the endpoint announced at registration is dialled from the kubelet's working
	// directory, not ours.
	for _, dir := range []*string{&c.registrarDir, &dataDir} {
		absolute, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		*dir = absolute
	}
	// The helper expects both directories to exist, as a kubelet host would provide them.
	for _, dir := range []string{c.registrarDir, dataDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	if c.cdiRoot != "" {
		if err := os.MkdirAll(c.cdiRoot, 0o750); err != nil {
			return err
		}
	}
	var unhealthy []string
	if c.unhealthy != "" {
		unhealthy = strings.Split(c.unhealthy, ",")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d, err := newDriver(c, devices(c), unhealthy, cancel)
	if err != nil {
		return err
	}
	defer d.close()

	options := []kubeletplugin.Option{
		kubeletplugin.DriverName(c.driverName),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.KubeClient(clientset),
		kubeletplugin.RegistrarDirectoryPath(c.registrarDir),
		kubeletplugin.PluginDataDirectoryPath(dataDir),
		kubeletplugin.GRPCVerbosity(c.grpcVerbosity),
		kubeletplugin.Serialize(c.serializeCalls),
		kubeletplugin.GRPCInterceptor(registrationLogger(d)),
	}
	if c.podUID != "" {
		options = append(options, kubeletplugin.RollingUpdate(types.UID(c.podUID)))
	}
	if c.nodeUIDOverride != "" {
		options = append(options, kubeletplugin.NodeUID(types.UID(c.nodeUIDOverride)))
	}
	helper, err := kubeletplugin.Start(ctx, d, options...)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin helper: %w", err)
	}
	defer helper.Stop()

	// One pool named after the node, one slice: what a node-local driver usually publishes.
	resources := resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{
			c.nodeName: {Slices: []resourceslice.Slice{{Devices: devices(c)}}},
		},
	}
	if err := helper.PublishResources(ctx, resources); err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	logger.Info("Driver started", "driver", c.driverName, "node", c.nodeName, "registrar", c.registrarDir,
		"pluginDataDir", dataDir, "devices", c.numDevices, "contentType", cfg.ContentType)

	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	logger.Info("Driver stopping")
	return nil
}

// registrationLogger records every NotifyRegistrationStatus the kubelet sends (the helper keeps
// only the latest), so a re-registration after a kubelet restart shows in the state file.
func registrationLogger(d *driver) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if status, ok := req.(*registerapi.RegistrationStatus); ok {
			if status.PluginRegistered {
				klog.FromContext(ctx).Info("Registered with the kubelet")
			} else {
				klog.FromContext(ctx).Error(nil, "The kubelet refused the registration", "error", status.Error)
			}
			d.record(record{Op: "registration", Registered: &status.PluginRegistered, Error: status.Error})
		}
		return handler(ctx, req)
	}
}

func main() {
	c := parseFlags()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	if err := run(ctx, c); err != nil {
		klog.Background().Error(err, "Driver failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
