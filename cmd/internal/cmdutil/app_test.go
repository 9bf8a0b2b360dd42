package cmdutil

import "testing"

func TestErrorField(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"pipette-launch: --master-port 0: want 1-65535":                                            "--master-port",
		"plan: --tp 3 does not divide 40 heads":                                                    "--tp",
		"-o: give the cluster file to write":                                                       "-o",
		"cluster c.yaml: cluster file: clusters[1].gpus_per_host (line 7, column 20): must be > 0": "clusters[1].gpus_per_host",
		"pipette-launch: megatron arguments: missing: --vocab-size":                                "",
		"probe: no hosts: give --hosts":                                                            "",
		"pipette-launch run: flag provided but not defined: -dry-runn (see pipette-launch)":        "",
	} {
		if got := errorField(msg); got != want {
			t.Errorf("errorField(%q) = %q, want %q", msg, got, want)
		}
	}
}
