package main

// The `schema` command: every served-by-upstream kind's protobuf message, read by reflection from
// the Go types (their `protobuf`, `protobuf_key`, `protobuf_val` and `json` struct tags), written as
// the JSON document app/protobuf_schema.json holds. The tags are the interface definition: field
// numbers, wire types and JSON names are facts the Python codec must match.

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Types whose JSON form is not their struct's: the codec handles each by this name.
var specialTypes = map[string]string{
	"k8s.io/apimachinery/pkg/apis/meta/v1.Time":       "time",
	"k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime":  "microtime",
	"k8s.io/apimachinery/pkg/apis/meta/v1.Duration":   "duration",
	"k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1":   "fieldsv1",
	"k8s.io/apimachinery/pkg/api/resource.Quantity":   "quantity",
	"k8s.io/apimachinery/pkg/util/intstr.IntOrString": "intorstring",
	"k8s.io/apimachinery/pkg/runtime.RawExtension":    "rawextension",
}

// Field is one protobuf field of a message, with what its JSON form needs.
type Field struct {
	Number int    `json:"n"`
	JSON   string `json:"json"`
	// "scalar" | "message" | "list" | "map"
	Label string `json:"label"`
	// The element (for list/map: of the items or values): a scalar kind (string, bool, int32,
	// int64, uint32, uint64, float64, bytes), a special type's name, or "message".
	Type string `json:"type"`
	// The message of Type == "message".
	Message string `json:"message,omitempty"`
	// A map's key kind (string, int32, ...).
	Key string `json:"key,omitempty"`
	// The Go field is a pointer (written only when set, JSON null when not).
	Pointer   bool `json:"pointer,omitempty"`
	OmitEmpty bool `json:"omitempty,omitempty"`
	OmitZero  bool `json:"omitzero,omitempty"`
	// An embedded struct whose JSON fields sit in the parent's object.
	Inline bool `json:"inline,omitempty"`
	// A list or map value of a named slice type: wrapped in a message whose field 1 holds the items.
	Wrapped bool `json:"wrapped,omitempty"`
	// Repeated scalars written packed.
	Packed bool `json:"packed,omitempty"`
	// A list element that is a pointer, or a list that is nil vs empty matters (named list types).
	ElementPointer bool `json:"elementPointer,omitempty"`
	// The Go type as encoding/json names it in its errors (a pointer's element type): the field's
	// ("[]v1.DeviceRequest", "v1.ResourceList", "int64"), a list's or map's element ("v1.DeviceRequest",
	// "resource.Quantity"), and the items of a wrapped element ("string" of v1.ExtraValue).
	Go     string `json:"go,omitempty"`
	GoElem string `json:"goElem,omitempty"`
	GoItem string `json:"goItem,omitempty"`
}

// goType is a type as encoding/json's errors name it: what a pointer points to, in reflect's words.
func goType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.String()
}

type Schema struct {
	// "group/version/Kind" (core: "v1/Kind") -> message name.
	Kinds map[string]string `json:"kinds"`
	// message name (Go package path + "." + type name) -> its fields in field-number order.
	Messages map[string][]Field `json:"messages"`
}

type walker struct {
	messages map[string][]Field
}

func typeName(t reflect.Type) string { return t.PkgPath() + "." + t.Name() }

func scalarKind(t reflect.Type) (string, bool) {
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "bool", true
	case reflect.Int32:
		return "int32", true
	case reflect.Int64, reflect.Int:
		return "int64", true
	case reflect.Uint32:
		return "uint32", true
	case reflect.Uint64:
		return "uint64", true
	case reflect.Float64:
		return "float64", true
	case reflect.Float32:
		return "float32", true
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "bytes", true
		}
	}
	return "", false
}

// element describes a single value's type: scalar kind, special name, or a message (walked).
func (w *walker) element(t reflect.Type) (kind string, message string, pointer bool) {
	if t.Kind() == reflect.Pointer {
		pointer = true
		t = t.Elem()
	}
	if special, ok := specialTypes[typeName(t)]; ok {
		return special, "", pointer
	}
	if scalar, ok := scalarKind(t); ok {
		return scalar, "", pointer
	}
	if t.Kind() == reflect.Struct {
		w.walk(t)
		return "message", typeName(t), pointer
	}
	panic(fmt.Sprintf("unsupported element type %s", t))
}

func parseTag(tag string) (wire string, number int, label string, opts map[string]string) {
	parts := strings.Split(tag, ",")
	wire = parts[0]
	number, err := strconv.Atoi(parts[1])
	if err != nil {
		panic(fmt.Sprintf("bad protobuf tag %q", tag))
	}
	opts = map[string]string{}
	rest := parts[2:]
	if len(rest) > 0 && (rest[0] == "opt" || rest[0] == "rep" || rest[0] == "req") {
		label, rest = rest[0], rest[1:]
	}
	for _, p := range rest {
		k, v, _ := strings.Cut(p, "=")
		opts[k] = v
	}
	return
}

func (w *walker) walk(t reflect.Type) {
	name := typeName(t)
	if _, done := w.messages[name]; done {
		return
	}
	if _, special := specialTypes[name]; special {
		return
	}
	w.messages[name] = nil // a placeholder against recursion
	var fields []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("protobuf")
		if !ok {
			continue // TypeMeta and the like: carried by the envelope
		}
		_, number, _, opts := parseTag(tag)
		f := Field{Number: number}
		jsonTag := sf.Tag.Get("json")
		jsonName, jsonOpts, _ := strings.Cut(jsonTag, ",")
		for _, o := range strings.Split(jsonOpts, ",") {
			switch o {
			case "omitempty":
				f.OmitEmpty = true
			case "omitzero":
				f.OmitZero = true
			case "inline":
				f.Inline = true
			}
		}
		if sf.Anonymous && jsonName == "" {
			f.Inline = true // encoding/json puts an unnamed embedded struct's fields in the parent
		}
		if jsonName == "" && !f.Inline {
			jsonName = sf.Name
		}
		f.JSON = jsonName
		if _, packed := opts["packed"]; packed {
			f.Packed = true
		}
		ft := sf.Type
		f.Go = goType(ft)
		switch {
		case ft.Kind() == reflect.Map:
			f.Label = "map"
			key, _, _ := w.element(ft.Key())
			f.Key = key
			vt := ft.Elem()
			f.GoElem = goType(vt)
			if vt.Kind() == reflect.Slice && vt.Elem().Kind() != reflect.Uint8 && vt.Name() != "" {
				f.Wrapped = true
				vt = vt.Elem()
				f.GoItem = goType(vt)
			}
			f.Type, f.Message, f.ElementPointer = w.element(vt)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			f.Label = "list"
			et := ft.Elem()
			f.GoElem = goType(et)
			if et.Kind() == reflect.Slice && et.Elem().Kind() != reflect.Uint8 && et.Name() != "" {
				f.Wrapped = true
				et = et.Elem()
				f.GoItem = goType(et)
			}
			f.Type, f.Message, f.ElementPointer = w.element(et)
		default:
			f.Type, f.Message, f.Pointer = w.element(ft)
			if f.Type == "message" {
				f.Label = "message"
			} else {
				f.Label = "scalar"
			}
			if f.Pointer && ft.Elem().Kind() == reflect.Slice && ft.Elem().Elem().Kind() != reflect.Uint8 {
				panic(fmt.Sprintf("%s.%s: pointer to a list", name, sf.Name))
			}
		}
		fields = append(fields, f)
	}
	sort.Slice(fields, func(a, b int) bool { return fields[a].Number < fields[b].Number })
	w.messages[name] = fields
}

// Kinds of meta.k8s.io (and the watch event) that a resource endpoint answers or reads besides a
// group's own kinds.
var metaKinds = map[string]runtime.Object{
	"meta.k8s.io/v1/PartialObjectMetadata":     &metav1.PartialObjectMetadata{},
	"meta.k8s.io/v1/PartialObjectMetadataList": &metav1.PartialObjectMetadataList{},
	"meta.k8s.io/v1/Table":                     &metav1.Table{},
	"meta.k8s.io/v1/DeleteOptions":             &metav1.DeleteOptions{},
	"meta.k8s.io/v1/WatchEvent":                &metav1.WatchEvent{},
	"v1/Status":                                &metav1.Status{},
	"v1/APIVersions":                           &metav1.APIVersions{},
	"v1/APIGroupList":                          &metav1.APIGroupList{},
	"v1/APIGroup":                              &metav1.APIGroup{},
	"v1/APIResourceList":                       &metav1.APIResourceList{},
}

func kindKey(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "/" + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}

func buildSchema() Schema {
	w := &walker{messages: map[string][]Field{}}
	kinds := map[string]string{}
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || !strings.HasPrefix(t.PkgPath(), "k8s.io/api/") {
			continue
		}
		w.walk(t)
		kinds[kindKey(gvk)] = typeName(t)
	}
	for key, obj := range metaKinds {
		t := reflect.TypeOf(obj).Elem()
		w.walk(t)
		kinds[key] = typeName(t)
	}
	return Schema{Kinds: kinds, Messages: w.messages}
}

func writeSchema() {
	out, err := json.MarshalIndent(buildSchema(), "", " ")
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(out, '\n'))
}
