// Package conformance holds make conformance: the corpus of public launch
// lines (testdata/corpus, read by conformance/corpus) judged by the real
// frameworks, Megatron-LM's argument validation and DeepSpeed's config
// class and engine, through the kits of ../shared/frameworks (kit/ holds
// the small drivers that run inside them). See docs/conformance.md.
package conformance
