// Package plural writes counts of things in messages people read: "1 error",
// "2 errors".
package plural

import "strconv"

// Count is n followed by noun, with an s unless n is 1. Only for nouns
// whose plural adds s.
func Count[N ~int | ~int64 | ~uint64](n N, noun string) string {
	s := strconv.FormatInt(int64(n), 10) + " " + noun
	if n != 1 {
		s += "s"
	}
	return s
}
