// A CoreDNS with only the plugins the test cluster's DNS needs (no forwarding: a pod's query for
// a name outside cluster.local is answered here, never sent off the machine). Built by
// test/services/kube/binaries.ts from the Go module proxy and cached with the Kubernetes binaries.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// The plugin chain's order, as CoreDNS's own plugin.cfg orders these plugins.
func init() {
	dnsserver.Directives = []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}
}

func main() { coremain.Run() }
