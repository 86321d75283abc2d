package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/cexec/cexec/client"
)

// Connect to the daemon at $CEXECD_ADDRESS (or the default socket) and list
// its plugins.
func ExampleNew() {
	ctx := context.Background()
	c, err := client.New(ctx, "")
	if err != nil {
		// A *client.NotRunningError says where it looked and how to
		// start cexecd.
		log.Fatal(err)
	}
	defer c.Close()
	plugins, err := c.ListPlugins(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range plugins {
		fmt.Println(p.GetKind(), p.GetName(), p.GetStatus(), p.GetRestarts())
	}
}
