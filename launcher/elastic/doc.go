// Package elastic is the restart loop of an elastic job (torchrun's
// --nnodes MIN:MAX, DeepSpeed's --elastic_training): it runs attempts,
// reads each failure into the hosts to blame and why (a lost host, a host
// that failed its check, a failing rank), leaves those hosts out of the
// next attempt, stops on a script's own bug instead of burning restarts,
// takes a host left out in again when it answers while the job runs below
// MAX (a restart right after the job's next checkpoint line, rejoin.go),
// and says what happened in a summary.
//
// Its interface is narrow on purpose: an attempt is hosts in, a job out
// (Options.Prepare, which the command supplies: it re-plans and renders
// for those hosts), and the job's run (Options.Launch, launcher/launch).
// It never sees a plan, and launcher/launch never sees one either.
package elastic
