// Package model is the shape of the model being trained (layers, hidden
// size, heads, vocabulary, mixture of experts), its YAML form and checks,
// its parameter counts, and the built-in presets.
package model
