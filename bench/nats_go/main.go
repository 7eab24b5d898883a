// One JetStream producer for bench/bench_proxy.py's fan-in peer, with NATS' own Go client (nats.go): publishes
// "records" 1 KiB messages to "subject" with PublishAsync, at most "window" unacknowledged, each with a
// Nats-Msg-Id header (deduplication), waits for every acknowledgement and prints the same JSON summary as the
// Python producers: start, end (wall clock, seconds), records, duplicates.
//
// Usage: nats_go_producer JSON   (JSON: url, subject, records, window, go (start time), producer)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
)

type spec struct {
	URL      string  `json:"url"`
	Subject  string  `json:"subject"`
	Records  int     `json:"records"`
	Window   int     `json:"window"`
	Go       float64 `json:"go"`
	Producer string  `json:"producer"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "nats_go_producer: "+format+"\n", args...)
	os.Exit(1)
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func main() {
	if len(os.Args) != 2 {
		fail("usage: nats_go_producer JSON")
	}
	var s spec
	if err := json.Unmarshal([]byte(os.Args[1]), &s); err != nil {
		fail("bad JSON argument: %v", err)
	}
	nc, err := nats.Connect(s.URL)
	if err != nil {
		fail("connect %s: %v", s.URL, err)
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.PublishAsyncMaxPending(s.Window))
	if err != nil {
		fail("jetstream: %v", err)
	}
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = 'x'
	}
	msg := func(id string) *nats.Msg {
		m := nats.NewMsg(s.Subject)
		m.Data = payload
		m.Header.Set(nats.MsgIdHdr, id)
		return m
	}
	if _, err := js.PublishMsg(msg(s.Producer + "-warmup")); err != nil { // connect: untimed
		fail("warm-up publish: %v", err)
	}
	if wait := s.Go - now(); wait > 0 {
		time.Sleep(time.Duration(wait * 1e9))
	}
	start := now()
	futures := make([]nats.PubAckFuture, 0, s.Records)
	for i := 0; i < s.Records; i++ {
		f, err := js.PublishMsgAsync(msg(fmt.Sprintf("%s-%d", s.Producer, i)))
		if err != nil {
			fail("publish %d: %v", i, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(600 * time.Second):
		fail("acknowledgements still pending after 600 s")
	}
	end := now()
	duplicates := 0
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				duplicates++
			}
		case err := <-f.Err():
			fail("message %d not acknowledged: %v", i, err)
		}
	}
	out, _ := json.Marshal(map[string]interface{}{"start": start, "end": end, "records": s.Records, "duplicates": duplicates})
	fmt.Println(string(out))
}
