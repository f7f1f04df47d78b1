/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Replays every file of the given directories through the CM fuzz target's
 * entry point without libFuzzer (any compiler): the committed seeds and every
 * crash input found so far run in the regular suites.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_dir(const char *dir, unsigned *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d) {
		fprintf(stderr, "fuzz_cm_replay: cannot open %s\n", dir);
		return -1;
	}
	while ((e = readdir(d))) {
		char path[4096];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		uint8_t *buf = malloc(1 << 20);
		size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
		fclose(f);
		if (buf)
			LLVMFuzzerTestOneInput(buf, len);
		free(buf);
		(*n)++;
	}
	closedir(d);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned n = 0;

	for (int i = 1; i < argc; i++)
		if (replay_dir(argv[i], &n) < 0)
			return 1;
	printf("fuzz_cm_replay: %u inputs replayed\n", n);
	return n ? 0 : 1;
}
