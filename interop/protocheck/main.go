// protocheck speaks Kubernetes protobuf with upstream's own serializers (k8s.io/apimachinery and
// the k8s.io/api types at v0.37.2), so the tests can compare this server's bytes with upstream's.
//
//	protocheck schema   the protobuf messages of every kind, as JSON (app/protobuf_schema.json)
//	protocheck serve    one JSON request per input line, one JSON answer per output line:
//	    {"op":"encode","object":{...}}      -> {"data":"<base64 of the k8s\0 envelope>"}
//	    {"op":"decode","data":"<base64>"}    -> {"object":{...}} (Go's JSON of the decoded object)
//	    {"op":"watch","data":"<base64>"}     -> {"events":[{"type":...,"object":{...}},...]}
//	    errors answer {"error":"..."}
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: protocheck schema|serve")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "schema":
		writeSchema()
	case "serve":
		serve()
	default:
		fmt.Fprintln(os.Stderr, "usage: protocheck schema|serve")
		os.Exit(2)
	}
}

type request struct {
	Op     string          `json:"op"`
	Object json.RawMessage `json:"object,omitempty"`
	Data   string          `json:"data,omitempty"`
}

func serve() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		var req request
		answer := map[string]any{}
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			answer["error"] = err.Error()
		} else if err := handle(req, answer); err != nil {
			answer["error"] = err.Error()
		}
		line, _ := json.Marshal(answer)
		out.Write(append(line, '\n'))
		out.Flush()
	}
}

func handle(req request, answer map[string]any) error {
	switch req.Op {
	case "encode":
		data, err := encode(req.Object)
		if err != nil {
			return err
		}
		answer["data"] = base64.StdEncoding.EncodeToString(data)
	case "decode", "watch":
		data, err := base64.StdEncoding.DecodeString(req.Data)
		if err != nil {
			return err
		}
		if req.Op == "decode" {
			obj, err := decode(data)
			if err != nil {
				return err
			}
			answer["object"] = obj
		} else {
			events, err := decodeWatch(data)
			if err != nil {
				return err
			}
			answer["events"] = events
		}
	default:
		return fmt.Errorf("unknown op %q", req.Op)
	}
	return nil
}
