package main

import (
	"os"
	"reflect"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// three-islands-2048.yaml, written by hand for issue 23, is the very
// cluster the generator's three-islands kind builds at 2,048 hosts: the
// same islands, hosts (names and order), GPUs, NICs and links once
// resolved, so timings on either describe one cluster.
func TestHandwrittenThreeIslandsIsTheGeneratedShape(t *testing.T) {
	data, err := os.ReadFile("three-islands-2048.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hand, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("three-islands-2048.yaml: %v", err)
	}
	gen, err := Generate("three-islands", 2048)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := hand.Resolve()
	if err != nil {
		t.Fatalf("three-islands-2048.yaml: %v", err)
	}
	gc, err := gen.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if len(hc.Hosts) != 2048 || len(hc.Islands) != 3 {
		t.Fatalf("%d hosts in %d islands, want 2048 in 3", len(hc.Hosts), len(hc.Islands))
	}
	if !reflect.DeepEqual(hc, gc) {
		for i := range hc.Hosts {
			if !reflect.DeepEqual(hc.Hosts[i], gc.Hosts[i]) {
				t.Fatalf("host %d: hand-written %+v, generated %+v", i, hc.Hosts[i], gc.Hosts[i])
			}
		}
		for i := range hc.Islands {
			if !reflect.DeepEqual(hc.Islands[i], gc.Islands[i]) {
				t.Fatalf("island %d: hand-written %+v, generated %+v", i, hc.Islands[i], gc.Islands[i])
			}
		}
		t.Fatalf("the resolved clusters differ:\nhand-written %+v\ngenerated %+v", hc, gc)
	}
}
