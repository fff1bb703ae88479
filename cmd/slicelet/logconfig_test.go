package main

import (
	"strings"
	"testing"

	"github.com/slicelet/slicelet/config"
	"github.com/slicelet/slicelet/internal/logging"
)

// TestLogConfigAgreesWithLogging: config validates [log] level and format without importing a
// logging package; every value it accepts must build a logger, and every value it refuses must
// be refused by the logger too.
func TestLogConfigAgreesWithLogging(t *testing.T) {
	levels := append([]string{"", "warning", "DEBUG", "Info"}, config.LogLevels...)
	for _, l := range levels {
		if _, err := logging.ParseLevel(l); err != nil {
			t.Errorf("config accepts log level %q, logging refuses it: %v", l, err)
		}
	}
	for _, l := range []string{"trace", "fatal", "verbose", "warn "} {
		if _, err := logging.ParseLevel(l); err == nil {
			t.Errorf("logging accepts log level %q, which config refuses", l)
		}
		cfg := config.Default()
		cfg.Log.Level = l
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "invalid log level") {
			t.Errorf("config accepts log level %q: %v", l, err)
		}
	}
	formats := append([]string{""}, config.LogFormats...)
	for _, f := range formats {
		if err := logging.ValidFormat(f); err != nil {
			t.Errorf("config accepts log format %q, logging refuses it: %v", f, err)
		}
	}
	for _, f := range []string{logging.FormatAuto, logging.FormatText, logging.FormatJSON, logging.FormatJournal} {
		cfg := config.Default()
		cfg.Log.Format = f
		if err := cfg.Validate(); err != nil {
			t.Errorf("logging has format %q, config refuses it: %v", f, err)
		}
	}
	for _, f := range []string{"yaml", "Text", "logfmt"} {
		if err := logging.ValidFormat(f); err == nil {
			t.Errorf("logging accepts log format %q, which config refuses", f)
		}
	}
}
