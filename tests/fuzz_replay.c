/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs a fuzz target (linked with this file) over files without libFuzzer,
 * with any compiler: the committed corpus and every crash turned regression
 * of each target are replayed by the test suites this way. One driver for
 * every target (engine, port, CM, CM on an engine, rsockets).
 * usage: TARGET_replay FILE|DIR...
 *
 * A target may define LLVMFuzzerInitialize (run once, first) and
 * fuzz_replay_report (what the inputs reached, printed after the last).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);
__attribute__((weak)) void fuzz_replay_report(FILE *out);

static unsigned replayed;

static int replay_file(const char *path)
{
	static uint8_t buf[1 << 20];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		perror(path);
		return 1;
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

	if (LLVMFuzzerInitialize)
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
	if (fuzz_replay_report)
		fuzz_replay_report(stdout);
	/* a corpus that went missing must not pass as "nothing crashed" */
	if (replayed == 0) {
		printf("FAIL: no input to replay (the corpus is empty or missing)\n");
		return 1;
	}
	printf("replayed %u inputs, no crash (nor a violation of the target's own checks)\n",
	       replayed);
	return rc ? 1 : 0;
}
