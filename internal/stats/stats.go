// Package stats holds the small statistics the project takes of measured
// samples (iteration times, GEMM rates, collective times).
package stats

import "slices"

// Number is what Median takes: floats, and integer types such as
// time.Duration.
type Number interface {
	~int | ~int32 | ~int64 | ~float32 | ~float64
}

// Median is the middle value of x, or the mean of the two middle values
// when len(x) is even; zero for an empty x. x is not reordered.
func Median[T Number](x []T) T {
	if len(x) == 0 {
		return 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
