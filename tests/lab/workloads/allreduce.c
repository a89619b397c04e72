/* The lab's MPI job (tests/lab/scenarios/ucx-mpi.sh): MPI_Allreduce of every rank's
 * vector, checked on every rank. Rank r contributes r + 1 + i at position i, so the sum
 * at i is n(n+1)/2 + n*i for n ranks: a rank that got another rank's data, or none, sees a
 * wrong sum. COUNT doubles are 8 MiB, past UCX's rendezvous threshold; an argument gives
 * another count (two-node.sh: 256 KiB, still past it, where 8 MiB takes a minute over the
 * emulated wire). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { DEFAULT_COUNT = 1 << 20 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int COUNT = argc > 1 ? atoi(argv[1]) : DEFAULT_COUNT;
  if (COUNT <= 0) {
    fprintf(stderr, "rank %d: bad count '%s'\n", rank, argv[1]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  double* in = malloc(COUNT * sizeof *in);
  double* out = malloc(COUNT * sizeof *out);
  if (in == NULL || out == NULL) {
    fprintf(stderr, "rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (int i = 0; i < COUNT; ++i) {
    in[i] = rank + 1 + (double)i;
  }
  MPI_Allreduce(in, out, COUNT, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  long wrong = 0;
  for (int i = 0; i < COUNT; ++i) {
    double want = size * (size + 1) / 2.0 + (double)size * i;
    wrong += out[i] != want;
  }
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  printf("allreduce rank %d of %d on %s: sum[0] %.0f sum[%d] %.0f, %ld wrong\n", rank, size, host,
         out[0], COUNT - 1, out[COUNT - 1], wrong);
  free(in);
  free(out);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
