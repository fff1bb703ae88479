// Package manpage generates the man pages of a cobra command tree (cobra's doc generator), so
// that --help, the shell completions and the packaged man pages come from one tree.
package manpage

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Command is the hidden "__man DIR" command: it writes the man pages of the root's tree into
// DIR, in section (1 for slicectl, 8 for slicelet) of manual. The pages are dated from
// SOURCE_DATE_EPOCH when it is set (reproducible packages), else today.
func Command(section, manual string) *cobra.Command {
	return &cobra.Command{
		Use:    "__man DIR",
		Short:  "Write the man pages into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			date, err := sourceDate(os.Getenv("SOURCE_DATE_EPOCH"))
			if err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true
			h := &doc.GenManHeader{Section: section, Manual: manual, Source: "slicelet", Date: &date}
			if err := doc.GenManTree(root, h, args[0]); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}
}

// sourceDate is SOURCE_DATE_EPOCH (seconds since the epoch) as a time, or now when empty.
func sourceDate(epoch string) (time.Time, error) {
	if epoch == "" {
		return time.Now().UTC(), nil
	}
	s, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", epoch)
	}
	return time.Unix(s, 0).UTC(), nil
}
