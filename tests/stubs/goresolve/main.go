// Go's own stub resolver (net.Resolver{PreferGo: true}), for the stub-resolver tests:
//
//	goresolve host NAME   LookupHost: one address a line
//	goresolve srv NAME    LookupSRV("", "", NAME): "PRIORITY WEIGHT PORT TARGET" a line
//
// Exit 2 with the error on stderr when the lookup fails.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goresolve host|srv NAME")
		os.Exit(64)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resolver := &net.Resolver{PreferGo: true}
	switch os.Args[1] {
	case "host":
		addrs, err := resolver.LookupHost(ctx, os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, addr := range addrs {
			fmt.Println(addr)
		}
	case "srv":
		_, records, err := resolver.LookupSRV(ctx, "", "", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, r := range records {
			fmt.Printf("%d %d %d %s\n", r.Priority, r.Weight, r.Port, r.Target)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: goresolve host|srv NAME")
		os.Exit(64)
	}
}
