/* flight_file.c — reading a flight recorder file (see flight_file.h). */
#include "common/flight_file.h"

#include <stdio.h>
#include <string.h>

int flight_file_position(const char *dir, int rank, char *out, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" FLIGHT_FILE_FORMAT, dir, rank);
    FILE *in = fopen(path, "r");
    if (!in)
        return 0;
    char line[512], kind[64], state[16], last[160] = "", open_one[160] = "";
    unsigned long long seq;
    int r, bucket;
    while (fgets(line, sizeof line, in)) {
        if (sscanf(line, "%d,%llu,%63[^,],%d,%*u,%15[^,],", &r, &seq, kind, &bucket, state) != 5)
            continue; /* the header */
        char here[160];
        if (bucket >= 0)
            snprintf(here, sizeof here, "%s #%llu (bucket %d, %s)", kind, seq, bucket, state);
        else
            snprintf(here, sizeof here, "%s #%llu (%s)", kind, seq, state);
        snprintf(last, sizeof last, "%s", here);
        if (!open_one[0] && strcmp(state, "done") != 0)
            snprintf(open_one, sizeof open_one, "%s", here);
    }
    fclose(in);
    const char *pick = open_one[0] ? open_one : last;
    if (!pick[0])
        return 0;
    snprintf(out, cap, "%s", pick);
    return 1;
}
