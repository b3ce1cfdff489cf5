package main

import (
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
)

func reflectNew(t reflect.Type) runtime.Object {
	return reflect.New(t).Interface().(runtime.Object)
}
