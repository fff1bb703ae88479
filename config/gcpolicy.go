package config

import "github.com/slicelet/slicelet/gc"

// Policy is the image GC planner's policy of [gc.images].
func (c ImageGC) Policy() gc.ImagePolicy {
	return gc.ImagePolicy{
		HighThresholdPercent: c.HighThresholdPercent,
		LowThresholdPercent:  c.LowThresholdPercent,
		MinAge:               c.MinimumAge,
		MaxAge:               c.MaximumAge,
	}
}

// Policy is the container GC planner's policy of [gc.containers].
func (c ContainerGC) Policy() gc.ContainerPolicy {
	return gc.ContainerPolicy{MinAge: c.MinimumAge, MaxPerPodContainer: c.MaxPerPodContainer, MaxContainers: c.MaxContainers}
}
