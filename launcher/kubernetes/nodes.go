package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CheckNode is a host's health check when hosts are node names (affinity
// node-names): the node exists, is Ready and takes new pods (not
// cordoned). nil when it passes.
func CheckNode(ctx context.Context, k Kubectl, node string) error {
	out, err := k.Run(ctx, nil, "get", "node", node, "-o", "json")
	if err != nil {
		if strings.Contains(err.Error(), "NotFound") {
			return fmt.Errorf("node %s does not exist", node)
		}
		return fmt.Errorf("node %s: %w", node, err)
	}
	var n nodeObject
	if err := json.Unmarshal(out, &n); err != nil {
		return fmt.Errorf("node %s: read kubectl's output: %w", node, err)
	}
	if why := n.unfit(); why != "" {
		return errors.New("node " + node + " " + why)
	}
	return nil
}

// CheckReadyNode is a host's health check when hosts are pod slots
// (affinity none, or pods placed by GPU product): the cluster has a node
// that is Ready and takes new pods.
func CheckReadyNode(ctx context.Context, k Kubectl) error {
	out, err := k.Run(ctx, nil, "get", "nodes", "-o", "json")
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	var list struct {
		Items []nodeObject `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return fmt.Errorf("nodes: read kubectl's output: %w", err)
	}
	var whys []string
	for _, n := range list.Items {
		why := n.unfit()
		if why == "" {
			return nil
		}
		whys = append(whys, n.Metadata.Name+" "+why)
	}
	if len(whys) == 0 {
		return errors.New("the cluster has no node")
	}
	return fmt.Errorf("no node of the cluster takes a pod: %s", strings.Join(whys, "; "))
}
