//go:build race

package preprocess

const raceEnabled = true
