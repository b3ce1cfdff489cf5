// Command etcd is etcd v3.7.3's server, for the upstream control plane the interop tests start
// (devtools/upstream.py). etcd's own main package is in its server module; building it from here
// keeps the version pinned in this module's go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
