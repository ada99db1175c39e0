// Command irdma-emu is the irdma-emu daemon and its tools.
//
// Each subcommand lives in its own file (cmd_<name>.go) and registers itself
// in an init function with register, so that adding a tool never touches
// this file.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// Exit statuses shared by every subcommand.
const (
	exitOK    = 0 // the command did what was asked and found nothing wrong
	exitFail  = 1 // the command ran, and what it examined is bad (e.g. a bad ICRC)
	exitUsage = 2 // bad flags, missing or unreadable files
)

// command is one subcommand of irdma-emu.
type command struct {
	name    string
	summary string // one line for the help listing
	// run executes the subcommand with the arguments after its name and
	// returns the process exit status.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]*command{}

// register adds a subcommand; it is called from init functions only.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("irdma-emu: duplicate subcommand " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: irdma-emu COMMAND [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'irdma-emu COMMAND -h' for the flags of a command")
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the subcommand named by args[0]; it is separate from main so
// tests can run the tool in-process.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "irdma-emu: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}
