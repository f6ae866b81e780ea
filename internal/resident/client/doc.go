// Package client is the resident helper's one client, the lean
// `agentbox run`: from a package init, before most of the binary's
// packages are initialised, it hands the run as typed (its arguments,
// directory, environment and stdio; package proto) to the helper, which
// resolves the policy exactly as the CLI would have and runs the command
// in a sandbox prepared for it. Anything the helper does not serve that
// way (no helper yet, a terminal, a flag error, a policy it does not
// hold) it says before anything runs, and the binary then starts as
// usual: the full CLI does what it always did. Only Linux has a helper;
// elsewhere the package does nothing.
//
// A Go program pays for every package it links at start-up: the CLI's
// package inits touch most of the binary, and resolving a policy in a
// cold process costs about as much again. The client imports only
// packages that initialise early (os, os/signal, syscall, strconv and
// errors, as packages ident, proto and wire do), so that it runs after a
// small fraction of the inits.
package client
