/*
 * cmd_redact.c - `granary redact-url`: plumbing for tools/mount.granary,
 * whose -v prints the command it runs with the metadata URL's password
 * hidden by the binary's own rule (meta_url_redact) rather than by a
 * second parser in sh. Not listed by `granary --help`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"
#include "tools/cli.h"

static const char usage[] =
    "usage: granary redact-url < URLS\n"
    "\n"
    "Print each metadata URL read from stdin (one a line) with its password\n"
    "replaced by ****, as granary's own messages show it. The URLs come on\n"
    "stdin, never as arguments: ps shows arguments. Plumbing for\n"
    "mount.granary -v.\n";

int cmd_redact(int argc, char **argv)
{
	char *line = NULL, *shown = NULL;
	size_t cap = 0, scap = 0;
	ssize_t n;
	int ret = CLI_EXIT_OK;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
		return cli_usage(usage, CLI_EXIT_OK);
	if (argc != 1) {
		cli_error("redact-url takes no argument: it reads the URLs "
			  "from stdin");
		return cli_usage(usage, CLI_EXIT_USAGE);
	}
	while ((n = getline(&line, &cap, stdin)) > 0) {
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		if (scap < (size_t)n + 8) { /* "****" may be longer */
			free(shown);
			scap = (size_t)n + 8;
			if (!(shown = malloc(scap))) {
				cli_error("out of memory");
				ret = CLI_EXIT_FAIL;
				break;
			}
		}
		meta_url_redact(line, shown, scap);
		puts(shown);
		fflush(stdout); /* a line at a time, for a script on a pipe */
	}
	if (line)
		explicit_bzero(line, cap);
	free(line);
	free(shown);
	return ret;
}
