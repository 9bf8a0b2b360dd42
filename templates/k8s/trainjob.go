package k8s

import (
	"fmt"
	"strconv"
)

// patchManager owns the runtime patch (a domain-prefixed path, as
// Trainer's webhook wants).
const patchManager = "pipette-launch/render"

// trainerNode is the replicated job and container a ClusterTrainingRuntime
// for torch names (Trainer's constants.Node).
const trainerNode = "node"

// TrainJobLimits says what a Trainer v2 TrainJob cannot carry of a plan:
// Render refuses the first two and warns about the rest.
var TrainJobLimits = []string{
	"one island only: a TrainJob has one trainer node group (one image, one resourcesPerNode, one node affinity), so a plan over two GPU types needs the JobSet format",
	"no priority class, scheduler name or arbitrary pod patch: its runtime patches allow only service account, volumes and mounts, node selector, affinity, tolerations, security context, scheduling gates and pull secrets; those belong to the ClusterTrainingRuntime",
	"the runtime's own torch environment (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR ...) is set too; the host script's per-rank variables (RANK, MASTER_ADDR, ...) win, since it sets them on top of the inherited ones",
}

// trainJobGraceWarning: a TrainJob cannot set its pods' termination grace
// (Trainer's runtime patches do not take terminationGracePeriodSeconds), so
// a deleted pod gets its ClusterTrainingRuntime's, Kubernetes' 30 s unless
// the runtime sets one, and the kubelet may kill the ranks before the host
// script's own SIGKILL, grace seconds after its SIGTERM (the JobSet format
// sets it: podStopMarginSeconds).
func trainJobGraceWarning(grace int) string {
	return fmt.Sprintf("a TrainJob's pods stop within the termination grace of its ClusterTrainingRuntime's pod template (Kubernetes' default is 30 s), which a TrainJob cannot set; the host scripts give ranks %d s between SIGTERM and SIGKILL (--stop-grace): give the runtime terminationGracePeriodSeconds of at least %d, or use the JobSet format, which sets it", grace, grace+podStopMarginSeconds)
}

// trainJobPods renames the single island's replicated job to Trainer's.
func trainJobPods(pods []Pod, rjobs []rjob, name string) ([]Pod, []rjob, error) {
	if len(rjobs) != 1 {
		return nil, nil, fmt.Errorf("kubernetes: --k8s-format trainjob: the plan spans %d islands; %s", len(rjobs), TrainJobLimits[0])
	}
	rjobs[0].name = trainerNode
	for i := range pods {
		pods[i].RJob = trainerNode
		pods[i].Name = fmt.Sprintf("%s-%s-0-%d", name, trainerNode, pods[i].Index)
	}
	rjobs[0].pods = pods
	return pods, rjobs, nil
}

// trainJob is a TrainJob on the torch ClusterTrainingRuntime o.Runtime,
// with the scripts' volume, env and affinity as a runtime patch.
func trainJob(islands []Island, rjobs []rjob, o Options, secretKeys []string) (Object, []string, error) {
	if o.PriorityClass != "" || o.SchedulerName != "" || o.PodPatch != nil {
		return nil, nil, fmt.Errorf("kubernetes: --k8s-format trainjob: %s", TrainJobLimits[1])
	}
	r := rjobs[0]
	isl := islands[r.island]
	env := podEnv(r.name)
	// A TrainJob's container patch has env but no envFrom: one
	// secretKeyRef per variable.
	for _, k := range secretKeys {
		env = append(env, Object{"name": k, "valueFrom": Object{"secretKeyRef": Object{"name": SecretName(o.Name), "key": k}}})
	}
	// Trainer's webhook refuses env in a runtime patch of the node
	// container: it goes in the trainer itself.
	trainer := Object{
		"image":    o.Image,
		"command":  []any{"/bin/sh", mountDir + "/entrypoint.sh"},
		"numNodes": len(r.pods),
		"env":      env,
	}
	if isl.GPUs > 0 {
		n := strconv.Itoa(isl.GPUs)
		trainer["resourcesPerNode"] = Object{"limits": Object{o.GPUResource: n}, "requests": Object{o.GPUResource: n}}
	}
	podPatch := Object{
		"volumes": []any{Object{"name": "pipette-launch", "configMap": Object{"name": configMapName(o.Name), "defaultMode": 0o555}}},
		"containers": []any{Object{"name": trainerNode,
			"volumeMounts": []any{Object{"name": "pipette-launch", "mountPath": mountDir, "readOnly": true}}}},
	}
	if a := affinity(isl, r, o); a != nil {
		podPatch["affinity"] = a
	}
	if o.ServiceAccount != "" {
		podPatch["serviceAccountName"] = o.ServiceAccount
	}
	md := meta(o, o.Name, nil)
	if o.Queue != "" {
		md["labels"].(Object)["kueue.x-k8s.io/queue-name"] = o.Queue
	}
	tj := Object{
		"apiVersion": "trainer.kubeflow.org/v1alpha1",
		"kind":       "TrainJob",
		"metadata":   md,
		"spec": Object{
			"runtimeRef": Object{"name": o.Runtime, "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
			"trainer":    trainer,
			"runtimePatches": []any{Object{
				"manager": patchManager,
				"trainingRuntimeSpec": Object{"template": Object{"spec": Object{"replicatedJobs": []any{Object{
					"name": trainerNode,
					"template": Object{"spec": Object{"template": Object{
						"metadata": Object{"labels": mergeLabels(o, Object{LabelIsland: dnsLabel(isl.Name)})},
						"spec":     podPatch,
					}}},
				}}}}},
			}},
		},
	}
	return tj, TrainJobLimits[2:], nil
}
