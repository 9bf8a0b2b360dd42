package remote

import (
	"reflect"
	"testing"
)

// RunEach's output: each task's first line names its node and the step,
// whatever order Slurm numbered the tasks in.
func TestSplitByNodeAndMarkedStep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		out      string
		byNode   map[string]string
		step     string
		splitErr bool
	}{
		{
			name:   "two nodes, tasks out of order",
			out:    "1: ::pipette-node:: node2 7\n0: ::pipette-node:: node1 7\n0: a\n1: b\n0: c\n",
			byNode: map[string]string{"node1": "a\nc", "node2": "b"},
			step:   "7",
		},
		{
			name:   "no step ID printed (an older marker)",
			out:    "0: ::pipette-node:: node1\n0: a\n",
			byNode: map[string]string{"node1": "a"},
		},
		{
			name:   "nothing printed",
			out:    "",
			byNode: map[string]string{},
		},
		{
			name:     "two tasks on one node",
			out:      "0: ::pipette-node:: node1 3\n1: ::pipette-node:: node1 3\n",
			step:     "3",
			splitErr: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, step, err := splitByNode(tc.out)
			if step != tc.step {
				t.Errorf("step = %q, want %q", step, tc.step)
			}
			if tc.splitErr {
				if err == nil {
					t.Errorf("splitByNode = %v, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.byNode) {
				t.Errorf("splitByNode = %v, %v; want %v", got, err, tc.byNode)
			}
		})
	}
}
