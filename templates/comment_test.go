package templates

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Values in the comments of what rendering writes (the --dry-run
// description, the NCCL communicator config) stay inside their comment
// line: a line break there started a line of its own.
func TestCommentsHoldTheirValues(t *testing.T) {
	var desc bytes.Buffer
	j := &job.Job{Name: "a\ntouch PWNED", WorkDir: "/w\nrm -rf x", Hosts: []job.HostJob{{Name: "h", Ranks: []job.RankJob{{Argv: []string{"x"}}}}}}
	if err := Describe(&desc, j); err != nil {
		t.Fatal(err)
	}
	c := &cluster.Cluster{Islands: []cluster.Island{{Spec: cluster.IslandSpec{Name: "ib\nnet_name: Socket"}}}}
	cfg := (&CommConfig{Nets: map[int]map[string]string{0: {}}, Islands: []int{0}}).YAML(c, 0)
	for what, text := range map[string]string{"description": desc.String(), "communicator config": string(cfg)} {
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "touch") || strings.HasPrefix(line, "rm -rf") || strings.HasPrefix(line, "net_name: Socket") {
				t.Errorf("the %s has a line of a value's own: %q\n%s", what, line, text)
			}
		}
	}
}
