// Package plan is `pipette-launch plan`: search the plans for a model on
// a cluster and print them ranked (table, --json, --breakdown, --as-is
// pricing of the hosts as listed, --report pages). Run takes Options and
// is what tests call.
package plan
