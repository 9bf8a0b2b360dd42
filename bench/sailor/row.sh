# Sourced by all.sh and ours.sh: Sailor's tree set up, and one row of a
# Sailor trace planned by pipette-launch and scored by Sailor's simulator,
# the one way both do it.
#
# sailor_defaults: root, py, work and archive from the environment
# (PYTHON, SAILOR_WORK, SAILOR_ARCHIVE), as ours.sh and best.sh take them.
# Needs here.
sailor_defaults() {
	root=$(cd "$here/../.." && pwd)
	py=${PYTHON:-/usr/bin/python3}
	work=${SAILOR_WORK:-/tmp/pipette-sailor}
	archive=${SAILOR_ARCHIVE:-$root/../shared/frameworks/src/sailor-cf2c8e3.tar.gz}
}
#
# sailor_tree ARCHIVE [reuse]: unpacks ARCHIVE into $work and prepares it
# (prepare.sh), unless "reuse" and $work already holds a prepared tree;
# sets S and sim, exports Sailor's environment and builds pipette-launch
# into $work. Needs here, work and py.
sailor_tree() {
	S=$work/home/sailor
	sim=$S/sailor/Planner/simulations
	if [ "${2:-}" != reuse ] || [ ! -f "$sim/simulator.py" ]; then
		mkdir -p "$work/src"
		tar -xzf "$1" -C "$work/src"
		PYTHON=$py "$here/prepare.sh" "$(find "$work/src" -mindepth 1 -maxdepth 1 -type d | head -1)" "$work"
	fi
	export SAILOR_PATH=$work/home PYTHONPATH=$S:$sim
	(cd "$here/../.." && go build -o "$work/pipette-launch" ./cmd/pipette-launch)
}
#
# plan_row DIR: plans DIR/cluster.yaml (clusters.py wrote it) as the artifact's
# scenario (OPT-350M, global batch 1024, DeepSpeed, fp32, no recompute, ten
# plans) into DIR/plan.json, then scores the plans in rank order into
# DIR/score.txt until one passes Sailor's check_config_fits. Sets start and
# end (the planning's wall clock) and k (the plan scored last, 1-based).
# Needs here, work, py and Sailor's environment (SAILOR_PATH, PYTHONPATH).
plan_row() {
	start=$(date +%s.%N)
	"$work/pipette-launch" plan --cluster "$1/cluster.yaml" --model "$here/opt-350m.yaml" --global-batch-size 1024 \
		--framework deepspeed --precision fp32 --recompute none --top 10 --json >"$1/plan.json"
	end=$(date +%s.%N)
	n=$("$py" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["plans"]))' "$1/plan.json")
	: >"$1/score.txt"
	k=1
	for k in $(seq 1 "$n"); do # the first plan Sailor's memory check passes
		"$py" "$here/score.py" --plan-json "$1/plan.json" --hosts "$1/hosts.json" --plan "$k" >>"$1/score.txt" 2>>"$1/score.log"
		tail -1 "$1/score.txt" | grep -q '"fits": true' && break
	done
}
