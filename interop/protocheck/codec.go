package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/client-go/kubernetes/scheme"
)

var (
	codecScheme = runtime.NewScheme()
	protoCodec  *protobuf.Serializer
	rawCodec    *protobuf.RawSerializer
	jsonCodec   *jsonserializer.Serializer
)

func init() {
	// client-go's scheme, plus the meta.k8s.io kinds a resource endpoint may answer.
	for gvk, t := range scheme.Scheme.AllKnownTypes() {
		codecScheme.AddKnownTypeWithName(gvk, reflectNew(t))
	}
	meta := schema.GroupVersion{Group: "meta.k8s.io", Version: "v1"}
	codecScheme.AddKnownTypes(meta, &metav1.PartialObjectMetadata{}, &metav1.PartialObjectMetadataList{}, &metav1.Table{})
	protoCodec = protobuf.NewSerializer(codecScheme, codecScheme)
	rawCodec = protobuf.NewRawSerializer(codecScheme, codecScheme)
	jsonCodec = jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, codecScheme, codecScheme, jsonserializer.SerializerOptions{})
}

// encode: a JSON object (with apiVersion and kind) as upstream writes it in protobuf.
func encode(raw []byte) ([]byte, error) {
	obj, _, err := jsonCodec.Decode(raw, nil, nil)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := protoCodec.Encode(obj, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decode: a protobuf envelope as upstream reads it, answered as Go's JSON of the typed object.
func decode(data []byte) (json.RawMessage, error) {
	obj, gvk, err := protoCodec.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return json.Marshal(obj)
}

type event struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// decodeWatch: a protobuf watch stream (length-prefixed frames of WatchEvent messages whose
// objects are protobuf envelopes), read as client-go's watch decoder reads it.
func decodeWatch(data []byte) ([]event, error) {
	reader := framer.NewLengthDelimitedFrameReader(io.NopCloser(bytes.NewReader(data)))
	decoder := streaming.NewDecoder(reader, rawCodec)
	events := []event{}
	for {
		var got metav1.WatchEvent
		res, _, err := decoder.Decode(nil, &got)
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		if res != &got {
			return events, fmt.Errorf("decoded into %T", res)
		}
		object, err := decode(got.Object.Raw)
		if err != nil {
			return events, fmt.Errorf("event %d object: %w", len(events), err)
		}
		events = append(events, event{Type: got.Type, Object: object})
	}
}
