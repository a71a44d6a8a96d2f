package main

import (
	"io"
	"slices"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// completionShells are the shells `ccrun completion SHELL` writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

// completionShell reports whether args (without ccrun's own name) ask for a completion
// script: exactly "completion SHELL". Any other use of the word is a program named
// completion (ccrun -np 2 completion bash, or ccrun -- completion bash, runs it).
func completionShell(args []string) (string, bool) {
	if len(args) == 2 && args[0] == "completion" && slices.Contains(completionShells, args[1]) {
		return args[1], true
	}
	return "", false
}

// writeCompletion writes cobra's completion script for shell to w. The script calls
// ccrun __complete ARGS..., which completeArgs rewrites like a command line.
func writeCompletion(cmd *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return cmd.GenBashCompletionV2(w, true)
	case "zsh":
		return cmd.GenZshCompletion(w)
	default:
		return cmd.GenFishCompletion(w, true)
	}
}

// completeArgs rewrites the words after cobra's hidden __complete request as a command
// line (-np 2 -> --np 2), so that completion sees what a run would; other args are
// rewritten as usual.
func completeArgs(args []string, fs *pflag.FlagSet) []string {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return append([]string{args[0]}, rewriteArgs(args[1:], fs)...)
	}
	return rewriteArgs(args, fs)
}
