// Command pipette-testbed builds and removes real multi-host test clusters on
// one machine (network namespaces, one sshd per host, shaped links) for
// trying pipette-launch and for its tests.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}
