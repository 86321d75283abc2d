// Command 11-local-tools drives cexecd from Go with the client library
// (github.com/cexec/cexec/client): it lists the local tools packages the
// daemon found, searches for one, and runs a program that uses a local tool
// beside an upstream one. The daemon is the one at $CEXEC_SOCKET (or
// $CEXECD_ADDRESS, else the default socket); -tenant picks the tenant.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"

	cexecv1 "github.com/cexec/cexec/api/cexec/v1"
	"github.com/cexec/cexec/client"
)

const program = `from servers.filesystem import read_text_file
from servers.textutils import word_count
from servers.unitconv import convert_length

text = read_text_file(path="notes/banana.txt")["content"]
print("word_count of banana.txt:", word_count(text=text, top=2)["top"])
print("convert_length 5 km in mi:", convert_length(value=5, from_unit="km", to_unit="mi"))
`

func main() {
	tenant := flag.String("tenant", os.Getenv("CEXEC_TENANT"), "tenant to act as (default $CEXEC_TENANT, else default)")
	flag.Parse()
	if err := run(context.Background(), *tenant); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, tenant string) error {
	c, err := client.New(ctx, "")
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()

	servers, err := c.ListServers(ctx)
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s.GetTransport() == "local" {
			fmt.Printf("local tools package %s, tools: %d\n", s.GetName(), s.GetTools())
		}
	}

	tools, err := c.ListTools(ctx, "unitconv")
	if err != nil {
		return err
	}
	for _, t := range tools {
		fmt.Printf("  %s (local=%t): %s\n  %s\n", t.GetId(), t.GetLocal(), t.GetImport(), t.GetSignature())
	}

	found, err := c.SearchTools(ctx, &cexecv1.SearchToolsRequest{Query: "convert kilometres to miles", Limit: 1, Tenant: tenant})
	if err != nil {
		return err
	}
	for _, h := range found.GetHits() {
		fmt.Printf("search \"convert kilometres to miles\" -> %s\n", h.GetId())
	}

	var out strings.Builder
	var res *cexecv1.ExecResult
	for ev, err := range c.Exec(ctx, &cexecv1.ExecRequest{Tenant: tenant, Code: program}) {
		if err != nil {
			return err
		}
		if o := ev.GetOutput(); o != nil {
			out.Write(o.GetData())
		}
		if r := ev.GetResult(); r != nil {
			res = r
		}
	}
	if res == nil || res.GetExitCode() != 0 {
		return fmt.Errorf("program failed: %s%v", out.String(), res.GetError())
	}
	fmt.Print(out.String())
	var calls []string
	for _, tc := range res.GetToolCalls() {
		calls = append(calls, tc.GetServer()+"/"+tc.GetTool())
	}
	fmt.Printf("tool calls through cexecd: %d (%s); the local tools ran in the sandbox\n", len(calls), strings.Join(calls, ", "))
	return nil
}
