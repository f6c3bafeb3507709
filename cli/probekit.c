// SPDX-License-Identifier: MIT
/* probekit.c - the probekit command: picks the subcommand, answers --help and --version. */

/*
 * probekit SUBCOMMAND [ARG]...    (probekit --help lists them)
 *
 * Each subcommand is a struct pkc_cmd in a cmd_NAME.c of its own and a
 * line in the table below. Those that run a COMMAND do it through run.c,
 * with libprobekit-agent.so preloaded in the subcommand's agent mode; the
 * command does not link libprobekit (agent/protocol.h is the seam).
 *
 * Exit status, as timeout(1) and env(1) have it: COMMAND's own status, or
 * 128+N when a signal N killed it; 125 when probekit itself failed (bad
 * usage, no agent, an unusable agent, no room for the counts, a report it
 * could not write; with --strict also counts that miss something: no
 * probe armed anywhere, processes not counted), 126 when COMMAND could
 * not be run, 127 when it was not found. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to probekit
 * go to COMMAND, and the status is still COMMAND's (run.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct pkc_cmd *const cmds[] = {
	&pkc_cmd_count,
	&pkc_cmd_list,
	&pkc_cmd_stat,
	&pkc_cmd_time,
	&pkc_cmd_trace,
};

#define N_CMDS (sizeof(cmds) / sizeof(cmds[0]))

void pkc_usage(FILE *f, const struct pkc_cmd *cmd)
{
	const char *lead = "usage:";

	for (size_t i = 0; i < N_CMDS; i++) {
		if (cmd && cmds[i] != cmd)
			continue;
		fprintf(f, "%s probekit %s\n", lead, cmds[i]->synopsis);
		lead = "      ";
	}
	fprintf(f, "%s probekit --help | --version\n", lead);
	for (size_t i = 0; i < N_CMDS; i++)
		if (!cmd || cmds[i] == cmd)
			fprintf(f, "\n%s", cmds[i]->help);
	fprintf(f,
		"Exit status: COMMAND's; 128+N if killed by signal N; 125 probekit failed;\n"
		"126 COMMAND could not run; 127 COMMAND not found.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		pkc_usage(stderr, NULL);
		return PKC_EXIT_OWN;
	}
	for (size_t i = 0; i < N_CMDS; i++)
		if (!strcmp(argv[1], cmds[i]->name))
			return cmds[i]->main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "--version")) {
		printf("probekit %s\n", PKC_VERSION_STRING);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		pkc_usage(stdout, NULL);
		return 0;
	}
	fprintf(stderr, "probekit: unknown command '%s'\n", argv[1]);
	pkc_usage(stderr, NULL);
	return PKC_EXIT_OWN;
}
