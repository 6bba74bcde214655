// Command fortio_decode reads Fortio JSON results with Fortio's own Go types, strictly: an
// unknown field or a value of the wrong type is an error. For each file it prints one JSON
// line: the file, "ok" or the decoder's error, and what it decoded (count, return codes).
// With -marshal FILE, it prints the decoded result written back as Fortio writes its -json
// file (json.MarshalIndent with two spaces, and a newline).
// With -buckets OFFSET DIVIDER VALUE..., it prints instead the index of the bucket each
// value lands in when Fortio's stats.Histogram records it (one line of JSON).
// tests/test_fortio_output.py builds it offline from the Go module cache.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"fortio.org/fortio/fgrpc"
	"fortio.org/fortio/fhttp"
	"fortio.org/fortio/periodic"
	"fortio.org/fortio/stats"
	"fortio.org/fortio/tcprunner"
	"fortio.org/fortio/udprunner"
)

type report struct {
	File     string
	Error    string `json:",omitempty"`
	Type     string
	Count    int64
	Errors   int64
	Buckets  int64
	RetCodes any
	Sockets  int64
}

func decode(data []byte, into any) error {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	return decoder.Decode(into)
}

func remarshal(name string) {
	data, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	var head struct{ RunType string }
	_ = json.Unmarshal(data, &head)
	var result any
	switch {
	case head.RunType == "HTTP":
		result = &fhttp.HTTPRunnerResults{}
	case strings.HasPrefix(head.RunType, "GRPC"):
		result = &fgrpc.GRPCRunnerResults{}
	case head.RunType == "TCP":
		result = &tcprunner.RunnerResults{}
	default:
		result = &udprunner.RunnerResults{}
	}
	if err = decode(data, result); err != nil {
		panic(err)
	}
	out, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))
}

func buckets(args []string) {
	number := func(text string) float64 {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			panic(err)
		}
		return v
	}
	offset, divider := number(args[0]), number(args[1])
	out := []int{}
	for _, text := range args[2:] {
		h := stats.NewHistogram(offset, divider)
		h.Record(number(text))
		for i, count := range h.Hdata {
			if count != 0 {
				out = append(out, i)
			}
		}
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-marshal" {
		remarshal(os.Args[2])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "-buckets" {
		buckets(os.Args[2:])
		return
	}
	for _, name := range os.Args[1:] {
		out := report{File: name}
		data, err := os.ReadFile(name)
		if err != nil {
			out.Error = err.Error()
		} else {
			var head struct{ RunType string }
			_ = json.Unmarshal(data, &head)
			var common *periodic.RunnerResults
			switch {
			case head.RunType == "HTTP":
				var r fhttp.HTTPRunnerResults
				err = decode(data, &r)
				common, out.RetCodes, out.Sockets = &r.RunnerResults, r.RetCodes, r.SocketCount
			case strings.HasPrefix(head.RunType, "GRPC"):
				var r fgrpc.GRPCRunnerResults
				err = decode(data, &r)
				common, out.RetCodes = &r.RunnerResults, r.RetCodes
			case head.RunType == "TCP":
				var r tcprunner.RunnerResults
				err = decode(data, &r)
				common, out.RetCodes, out.Sockets = &r.RunnerResults, r.RetCodes, int64(r.SocketCount)
			case head.RunType == "UDP":
				var r udprunner.RunnerResults
				err = decode(data, &r)
				common, out.RetCodes, out.Sockets = &r.RunnerResults, r.RetCodes, int64(r.SocketCount)
			default:
				err = fmt.Errorf("unknown RunType %q", head.RunType)
			}
			if err != nil {
				out.Error = err.Error()
			} else {
				out.Type = common.RunType
				out.Count = common.DurationHistogram.Count
				if common.ErrorsDurationHistogram != nil {
					out.Errors = common.ErrorsDurationHistogram.Count
				}
				for _, b := range common.DurationHistogram.Data {
					out.Buckets += b.Count
				}
			}
		}
		line, _ := json.Marshal(out)
		fmt.Println(string(line))
	}
}
