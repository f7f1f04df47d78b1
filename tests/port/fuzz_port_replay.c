/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs fuzz_port's target (fuzz_port.c) over files without libFuzzer (any compiler):
 * the committed corpus and every crash turned regression are replayed by
 * the test suite this way. usage: fuzz_port_replay FILE|DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned replayed;

static int replay_file(const char *path)
{
	static uint8_t buf[1 << 20];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	replayed++;
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *de;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			rc |= replay_file(argv[i]);
			continue;
		}
		d = opendir(argv[i]);
		while (d && (de = readdir(d)) != NULL) {
			char path[4096];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			rc |= replay_file(path);
		}
		if (d)
			closedir(d);
	}

	/* a corpus that went missing or empty must not pass as "nothing crashed" */
	if (replayed == 0) {
		printf("FAIL: no input to replay (the corpus is empty or missing)\n");
		return 1;
	}
	printf("replayed %u inputs, no crash, the neighbour cache held only plausible entries\n",
	       replayed);
	return rc ? 1 : 0;
}
