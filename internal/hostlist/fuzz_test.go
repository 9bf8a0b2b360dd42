package hostlist

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// Every expression either expands or errs; an expansion never holds more
// than limits.MaxHosts hosts or a name over limits.MaxNameLen, and Count
// agrees with it. Seeds are real Slurm node lists and --hosts values.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"node[01-16,20],gpu-a[1-2]", "root@node[01-04]:2222,gpu7", "rack[1-4]-node[1-8]",
		"[::1]:2222", "u@[fe80::1]:22,n[1-2]", "gpu-[08-10]", "w[1-100000]", "a,,b", "n[1-2]x[3-4]y[5-6]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		hosts, err := Expand(expr)
		n, cerr := Count(expr)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Expand err %v, Count err %v", err, cerr)
		}
		if err != nil {
			return
		}
		if len(hosts) > limits.MaxHosts || len(hosts) != n || n == 0 {
			t.Fatalf("%d hosts, Count %d", len(hosts), n)
		}
		for _, h := range hosts {
			if len(h) > limits.MaxNameLen {
				t.Fatalf("host name of %d bytes", len(h))
			}
		}
	})
}
