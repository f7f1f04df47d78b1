/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs fuzz_engine's target over files without libFuzzer (any compiler):
 * the committed corpus and every crash turned regression are replayed by
 * the test suite this way. usage: fuzz_engine_replay FILE|DIR...
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void fuzz_engine_report(FILE *out);

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
		if (!d) {
			perror(argv[i]);
			return 1;
		}
		while ((de = readdir(d)) != NULL) {
			char path[4096];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			rc |= replay_file(path);
		}
		closedir(d);
	}
	fuzz_engine_report(stdout);
	/* a corpus that went missing must not pass as "nothing crashed" */
	if (replayed == 0) {
		printf("FAIL: no input to replay (the corpus is empty or missing)\n");
		return 1;
	}
	printf("replayed %u inputs, no crash, no byte outside the region changed\n", replayed);
	return rc ? 1 : 0;
}
