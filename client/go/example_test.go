// example_test.go — runnable examples, checked by `go test` (their `// Output:`). Each talks
// to a stand-in for flurryd started in the example (standin_test.go), so the output is the
// same on every run; a program of yours names its servers instead, e.g. "127.0.0.1:7420" for
// the flurryd that scripts/run starts.
package flurry_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	flurry "flurry.dev/client"
)

// A client, a few IDs, and what one of them says.
func Example() {
	server := startFlurrydStandIn() // your program: your flurryd's HOST:PORT
	defer server.Close()

	opts := flurry.DefaultOptions()
	opts.Servers = []string{server.Addr}
	opts.Timeout = 5 * time.Second // per attempt (default 100 ms): a second attempt, on a loaded
	// machine, would be answered with the next IDs and change the output below
	client, err := flurry.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ids, err := client.Get(3) // exactly 3 unique IDs, or an error and none
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ids)

	info, err := client.Info() // the server's layout, to read its IDs
	if err != nil {
		log.Fatal(err)
	}
	d := info.Layout().Decode(ids[0])
	fmt.Println("node", d.Node, "counter", d.Counter, "at", d.UTC().Format(time.RFC3339Nano))
	// Output:
	// [132633958809628672 132633958809628673 132633958809628674]
	// node 7 counter 0 at 2025-01-01T00:00:00Z
}

// Next takes one ID; with Options.Prefetch it usually comes from a local buffer that a
// goroutine refills in the background.
func ExampleClient_Next() {
	server := startFlurrydStandIn()
	defer server.Close()

	opts := flurry.DefaultOptions()
	opts.Servers = []string{server.Addr}
	opts.Timeout = 5 * time.Second // as in Example: one attempt, the same output on any machine
	client, err := flurry.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	for i := 0; i < 2; i++ {
		id, err := client.Next()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id)
	}
	// Output:
	// 132633958809628672
	// 132633958809628673
}

// Every call that waits on the network has a Context variant: a deadline or a cancel ends it
// wherever it waits, with an error that wraps ctx.Err().
func ExampleClient_GetContext() {
	server := startFlurrydStandIn()
	defer server.Close()

	opts := flurry.DefaultOptions()
	opts.Servers = []string{server.Addr}
	opts.Timeout = 5 * time.Second // as in Example: one attempt, the same output on any machine
	client, err := flurry.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ids, err := client.GetContext(ctx, 2)
	fmt.Println(ids, err)

	cancel() // a call whose context has ended sends nothing
	_, err = client.GetContext(ctx, 2)
	fmt.Println(errors.Is(err, context.Canceled), errors.Is(err, flurry.ErrCanceled))
	// Output:
	// [132633958809628672 132633958809628673] <nil>
	// true true
}

// GetSeq takes numbers of a named sequence (flurryctl seq create invoices).
func ExampleClient_GetSeq() {
	server := startFlurrydStandIn()
	defer server.Close()

	opts := flurry.DefaultOptions()
	opts.Servers = []string{server.Addr}
	opts.Timeout = 5 * time.Second // as in Example: one attempt, the same output on any machine
	client, err := flurry.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	numbers, err := client.GetSeq("invoices", 3)
	fmt.Println(numbers, err)
	_, err = client.GetSeq("orders", 1)
	fmt.Println(errors.Is(err, flurry.ErrUnknownSequence))
	// Output:
	// [1 2 3] <nil>
	// true
}

// Every failure is a *flurry.Error; errors.Is tells the kinds apart, the message says what
// happened to which server.
func ExampleClient_Get_errors() {
	// A port nothing listens on: no answer comes.
	probe, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		log.Fatal(err)
	}
	nowhere := probe.LocalAddr().String()
	probe.Close()

	opts := flurry.DefaultOptions()
	opts.Servers = []string{nowhere}
	opts.Timeout = 20 * time.Millisecond
	opts.Attempts = 2
	client, err := flurry.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	_, err = client.Get(1)
	var e *flurry.Error
	fmt.Println(errors.Is(err, flurry.ErrNoAnswer), errors.As(err, &e) && e.Code == flurry.CodeNoAnswer)
	// Output:
	// true true
}

// One ID in each form. readable and uuid need the layout (Client.Info gives it), opaque a key
// ring (ReadOpaqueKeyRing reads a key file; this one is the README's test key).
func ExampleFormatAs() {
	layout := flurry.SnowflakeLayout()
	keys, err := flurry.ParseOpaqueKeyRing(`[[key]]
id = "k1"
secret = "000102030405060708090a0b0c0d0e0f"
`, "example")
	if err != nil {
		log.Fatal(err)
	}
	opts := flurry.FormOptions{Layout: &layout, Keys: keys}
	const id = 4194324487
	for _, form := range flurry.Forms {
		text, err := flurry.FormatAs(form, id, opts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-8v %s\n", form, text)
	}
	opts.Tag = "ORD"
	tagged, _ := flurry.FormatAs(flurry.FormReadable, id, opts)
	fmt.Println("tagged  ", tagged)
	// Output:
	// dec      4194324487
	// hex      0x00000000fa005007
	// readable 2401010000010000020487
	// base32   0000003X00M07
	// opaque   k1_2TJVZN1P765Y3
	// uuid     018cc251-f7e8-7000-8000-0000fa005007
	// tagged   240101000001000ORD0020487
}

// ParseAny reads an ID in whichever form it is written; base32 also reads lower case and
// Crockford's aliases.
func ExampleParseAny() {
	layout := flurry.SnowflakeLayout()
	opts := flurry.FormOptions{Layout: &layout}
	for _, text := range []string{"0x00000000fa005007", "0000003x00m07", "240101000001000ORD0020487"} {
		parsed, err := flurry.ParseAny(text, opts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%v %d %q\n", parsed.Form, parsed.ID, parsed.Tag)
	}
	_, err := flurry.ParseAny("1234567890123", opts) // 13 digits: dec or base32?
	fmt.Println(err)
	// Output:
	// hex 4194324487 ""
	// base32 4194324487 ""
	// readable 4194324487 "ORD"
	// flurry: '1234567890123' reads as dec (1234567890123) and as base32 (1228503247364293699); say which form it is
}

// The uuid form is an RFC 9562 version-7 UUID that carries the whole ID: it sorts by time and
// decodes back exactly.
func ExampleLayout_FormatUUID() {
	layout := flurry.SnowflakeLayout()
	text, err := layout.FormatUUID(132633958809628672)
	fmt.Println(text, err)
	id, err := layout.ParseUUID(text)
	fmt.Println(id, err)
	// Output:
	// 01941f29-7c00-7000-81d7-35e200007000 <nil>
	// 132633958809628672 <nil>
}
