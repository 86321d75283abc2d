//go:build !race

package detect

// raceEnabled lets slow exhaustive tests sample when the race detector
// multiplies their cost; the full run happens without -race.
const raceEnabled = false
