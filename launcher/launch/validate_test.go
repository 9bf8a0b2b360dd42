package launch

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestHostsDifferingOnlyByPortAreTwoHosts: two containers on one machine
// (same name, other SSH ports) are two hosts of a job; the same host twice
// is still an error.
func TestHostsDifferingOnlyByPortAreTwoHosts(t *testing.T) {
	rank := func(r int) []job.RankJob { return []job.RankJob{{Rank: r, Argv: []string{"true"}}} }
	job := job.Job{Name: "j", Hosts: []job.HostJob{{Name: "box", Port: 2222, Ranks: rank(0)}, {Name: "box", Port: 2223, Ranks: rank(1)}}}
	if err := validateJob(job); err != nil {
		t.Errorf("hosts differing by port: %v", err)
	}
	job.Hosts[1].Port = 2222
	if err := validateJob(job); err == nil || !strings.Contains(err.Error(), "box:2222 appears twice") {
		t.Errorf("the same host twice: %v", err)
	}
}
