/* hello_mpi.c -- the smallest real MPI program, for testing that a job script's launcher
 * (srun --mpi=pmix, or mpirun inside the allocation) wires ranks together.
 *
 *   hello_mpi [ANY ARGS...]   (arguments are ignored, so it can stand in for `attnsweep run CFG`)
 *
 * Every rank prints "hello rank R of P on HOST"; rank 0 then checks an MPI_Allreduce of the
 * ranks against P(P-1)/2 and prints "allreduce ok P" or fails with exit 1. Exit 0 on success. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "hello_mpi: MPI_Init failed\n");
        return 1;
    }
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    printf("hello rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);

    long mine = rank, total = -1;
    MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0) {
        long expected = (long)size * (size - 1) / 2;
        if (total == expected) {
            printf("allreduce ok %d\n", size);
        } else {
            fprintf(stderr, "hello_mpi: allreduce of ranks gave %ld, expected %ld\n", total, expected);
            status = 1;
        }
        fflush(stdout);
    }
    MPI_Finalize();
    return status;
}
