/* launch.h -- one run of a sweep, on every rank of an MPI communicator (src/mpi/launch.c).
 *
 * The steps and what each checks are the run's (include/sweep/run.h); this layer adds the
 * collectives between them:
 *   1. every rank loads the config and its grid (for `run OUT.h5`, the config rank 0 read
 *      from the file, broadcast);
 *   2. rank 0 loads the text and broadcasts the token ids;
 *   3. the model: rank 0 of each node reads the weights into an MPI-3 shared-memory
 *      window, the node's other ranks map it (one copy per node;
 *      ATTNSWEEP_PRIVATE_WEIGHTS=1 gives every rank its own);
 *   4. rank 0 opens the output (run_open_output) and lists the units still to do, largest
 *      L first, which every rank receives;
 *   5. per model, the scheduler hands out units -- the pending L values of one window,
 *      computed from one forward pass at the grid's largest L (cell.h), so a result never
 *      depends on how cells were grouped, on the rank count or on resumes -- and rank 0
 *      commits their cells in batches of up to 64 (the progress lines count units);
 *   6. rank 0 closes the output with the state "finished", "interrupted" or "failed".
 * Errors found on one rank are made known to all, so every rank returns the
 * same result. Only rank 0 fills err with the real message. */
#ifndef ATTNSWEEP_LAUNCH_H
#define ATTNSWEEP_LAUNCH_H

#include <mpi.h>

#include "errors.h"
#include "run.h"

/* Returns a run_outcome, or -1 with err set (on rank 0). */
int launch_run(MPI_Comm comm, const run_opts *opts, run_summary *summary, as_err *err);

/* `attnsweep run` on MPI_COMM_WORLD: MPI started (FUNNELED: the master's writer thread,
 * writer.h, commits while the main thread alone calls MPI; granted less, the master
 * commits synchronously), the stop signals installed (signals.h: from here on a stop
 * only sets a flag, so a SIGTERM during start-up still ends in a resumable stop),
 * launch_run, MPI finalized. Every rank returns rank 0's result; *rank says which one
 * this was (rank 0 reports). */
int launch_main(int *argc, char ***argv, const run_opts *opts, run_summary *summary, int *rank,
               as_err *err);

#endif
