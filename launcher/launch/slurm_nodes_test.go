package launch

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// TestSlurmFailedNodes: a node Slurm reports not responding ("*"), down,
// drained or failing, or one gone from the job's node list, is failed,
// with Slurm's word for it; a node that runs the job is not. sinfo and
// scontrol are stand-ins printing what Slurm 22.05 prints for these
// states (sinfo -h -N -o "%N %T"; scontrol -o show job).
func TestSlurmFailedNodes(t *testing.T) {
	nodes := []string{"node1", "node2", "node3", "node4"}
	tests := []struct {
		name, sinfo, nodeList string
		want                  map[string]string
	}{
		{"all running", "node1 allocated\nnode2 allocated\nnode3 allocated\nnode4 mixed\n", "node[1-4]", map[string]string{}},
		{"not responding", "node1 allocated\nnode2 allocated*\nnode3 allocated\nnode4 allocated\n", "node[1-4]",
			map[string]string{"node2": "Slurm reports it not responding (allocated*)"}},
		{"down, dropped from a --no-kill job", "node1 allocated\nnode2 down*\nnode3 allocated\nnode4 allocated\n", "node[1,3-4]",
			map[string]string{"node2": "Slurm reports it not responding (down*)"}},
		{"dropped, back up", "node1 allocated\nnode2 idle\nnode3 allocated\nnode4 allocated\n", "node[1,3-4]",
			map[string]string{"node2": "Slurm removed it from job 7 (a failed node)"}},
		{"drained and failing", "node1 drained\nnode2 allocated\nnode3 fail\nnode4 allocated\n", "node[1-4]",
			map[string]string{"node1": "Slurm reports it drained", "node3": "Slurm reports it fail"}},
		{"job completing", "node1 completing\nnode2 completing\nnode3 completing\nnode4 completing\n", "(null)", map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			for name, body := range map[string]string{
				"sinfo":    "printf '%s' '" + tt.sinfo + "'",
				"scontrol": "echo 'JobId=7 JobName=x JobState=RUNNING ReqNodeList=(null) ExcNodeList=(null) NodeList=" + tt.nodeList + " BatchHost=node1'",
			} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
			got, err := SlurmFailedNodes(context.Background(), remote.Slurm{JobID: "7"}, nodes)
			if err != nil || !maps.Equal(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
