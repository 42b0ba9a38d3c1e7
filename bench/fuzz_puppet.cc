// A lib_api v11 extension library whose answers the fuzzer sets (bench/fuzz_surfaces.py).
//
// Every entry point mxc drives reads its answer from the exported struct `mxcf_cfg`:
// the version, whether initialize succeeds, the operators' names (arbitrary bytes), input
// and output counts, dtype codes, output shapes, messages, and which hook throws a C++
// exception.  The answers are arbitrary in *value* but honest about *memory*: every array
// the library hands over is as long as it says, as any library MXNet could load must be.
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern "C" {

struct MxcfConfig {
  int version, init_ok, nops, throw_at, nin, nout, type_code, ndim;
  unsigned dim;
  int n_ctx, parse_ok, shape_ok, type_ok, nmsg;
  char names[4][32];
  char msg[64];
};

MxcfConfig mxcf_cfg = {11, 1, 1, 0, 1, 1, 0, 2, 3, 1, 1, 1, 1, 0, {"puppet_op"}, {0}};

static void maybe_throw(int where) {
  if (mxcf_cfg.throw_at == where) throw std::runtime_error("puppet threw");
}

static int hook(void) { return 1; }
static const char* kCtx[4] = {"cpu", "gpu", "cpu", "tpu"};
static void* kFps[4] = {(void*)hook, (void*)hook, (void*)hook, (void*)hook};

int _opVersion(void) { maybe_throw(1); return mxcf_cfg.version; }
int initialize(int) { maybe_throw(2); return mxcf_cfg.init_ok; }
int _opRegSize(void) { maybe_throw(3); return mxcf_cfg.nops < 0 ? 0 : (mxcf_cfg.nops > 4 ? 4 : mxcf_cfg.nops); }

void _opRegGet(int i, const char** name, int* sg, const char*** c0, void*** f0, int* n0,
               const char*** c1, void*** f1, int* n1, const char*** c2, void*** f2, int* n2,
               void** parse, void** type, void** stype, void** shape, void** mutate) {
  maybe_throw(4);
  mxcf_cfg.names[i & 3][31] = 0;
  *name = mxcf_cfg.names[i & 3];
  *sg = 0;
  int n = mxcf_cfg.n_ctx < 0 ? 0 : (mxcf_cfg.n_ctx > 4 ? 4 : mxcf_cfg.n_ctx);
  *c0 = kCtx; *f0 = kFps; *n0 = n;
  *c1 = kCtx; *f1 = kFps; *n1 = 0;
  *c2 = kCtx; *f2 = kFps; *n2 = 0;
  *parse = (void*)hook; *type = (void*)hook; *stype = 0; *shape = (void*)hook;
  *mutate = (void*)hook;
}

void _opCallFree(void* p) { std::free(p); }

int _opCallParseAttrs(void*, const char**, const char**, int, int* nin, int* nout) {
  maybe_throw(5);
  *nin = mxcf_cfg.nin; *nout = mxcf_cfg.nout;
  return mxcf_cfg.parse_ok;
}

int _opCallInferShape(void*, const char**, const char**, int, unsigned** in, int* in_dims,
                      int nin, unsigned*** mod, int** mod_dims, unsigned*** out,
                      int** out_dims, int nout) {
  maybe_throw(6);
  if (nin < 0 || nout < 0) return 0;
  *mod = (unsigned**)std::malloc(sizeof(unsigned*) * (nin ? nin : 1));
  *mod_dims = (int*)std::malloc(sizeof(int) * (nin ? nin : 1));
  for (int i = 0; i < nin; i++) {
    (*mod_dims)[i] = in_dims[i];
    (*mod)[i] = (unsigned*)std::malloc(sizeof(unsigned) * (in_dims[i] ? in_dims[i] : 1));
    std::memcpy((*mod)[i], in[i], sizeof(unsigned) * in_dims[i]);
  }
  int nd = mxcf_cfg.ndim < 0 ? 0 : (mxcf_cfg.ndim > 8 ? 8 : mxcf_cfg.ndim);
  *out = (unsigned**)std::malloc(sizeof(unsigned*) * (nout ? nout : 1));
  *out_dims = (int*)std::malloc(sizeof(int) * (nout ? nout : 1));
  for (int i = 0; i < nout; i++) {
    (*out_dims)[i] = nd;
    (*out)[i] = (unsigned*)std::malloc(sizeof(unsigned) * (nd ? nd : 1));
    for (int j = 0; j < nd; j++) (*out)[i][j] = mxcf_cfg.dim;
  }
  return mxcf_cfg.shape_ok;
}

int _opCallInferType(void*, const char**, const char**, int, int*, int, int* out, int nout) {
  maybe_throw(7);
  for (int i = 0; i < nout; i++) out[i] = mxcf_cfg.type_code;
  return mxcf_cfg.type_ok;
}

int _opCallInferSType(void*, const char**, const char**, int, int*, int, int* out, int nout) {
  for (int i = 0; i < nout; i++) out[i] = 0;
  return 1;
}

int _opCallMutateInputs(void*, const char**, const char**, int, int** idx, int* size) {
  maybe_throw(8);
  *idx = (int*)std::malloc(sizeof(int));
  *size = 0;
  return 1;
}

int _opCallFCompute(void) { maybe_throw(9); return 0; }
int _opCallFStatefulCompute(void) { return 0; }
int _opCallCreateOpState(void) { return 0; }
void _opCallDestroyOpState(void*) {}

int _msgSize(void) { return mxcf_cfg.nmsg < 0 ? 0 : (mxcf_cfg.nmsg > 3 ? 3 : mxcf_cfg.nmsg); }
void _msgGet(int, const char** out) { mxcf_cfg.msg[63] = 0; *out = mxcf_cfg.msg; }

int _partRegSize(void) { return 0; }
int _partRegGetCount(void) { return 0; }
void _partRegGet(void) {}
int _partCallSupportedOps(void) { return 0; }
int _partCallCreateSelector(void) { return 0; }
void _partCallSelect(void) {}
void _partCallSelectInput(void) {}
void _partCallSelectOutput(void) {}
void _partCallFilter(void) {}
void _partCallReset(void) {}
int _partCallReviewSubgraph(void) { return 0; }
int _passRegSize(void) { return 0; }
void _passRegGet(void) {}
int _passCallGraphPass(void) { return 0; }

}  // extern "C"
