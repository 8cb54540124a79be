"""Writes `llama3_fp8_and_tp2_step_times_composed.derived.csv` (to stdout) from the kernel database:
FP8 Llama-3.1 8B (TP 1, 2, 4, 8) and 70B (TP 2, 4, 8; TP 1 on H200 only, the only GPU here with room for
its 70 GB of FP8 weights and a KV cache) and BF16 70B at TP 2, on H100 and H200, on the grid of the shared
BF16 file: one prompt of 128-16,384 tokens; decode batches 1-256 at 1,024 and 4,096 tokens of context.
Run from this folder: python3 compose_fp8_and_tp2.py > llama3_fp8_and_tp2_step_times_composed.derived.csv
(the kernel database path is set in compose_step_times.py).
"""
from compose_step_times import *
import csv, sys
CONFIGS=[]
for gpu in ['h100_sxm','h200_sxm']:
    for tp in [1,2,4,8]: CONFIGS.append((gpu,'llama3-8b',tp,'fp8'))
    for tp in ([1] if gpu=='h200_sxm' else [])+[2,4,8]: CONFIGS.append((gpu,'llama3-70b',tp,'fp8'))
    CONFIGS.append((gpu,'llama3-70b',2,'bf16'))
w=csv.writer(sys.stdout, lineterminator='\n')
w.writerow(['gpu','model','tp','precision','metric','point','value_ms','tokens_per_s'])
for gpu,model,tp,prec in CONFIGS:
    dt={'fp8':'fp8','bf16':'bfloat16'}[prec]
    for isl in [128,512,1024,2048,4096,8192,16384]:
        v=prefill(gpu,model,tp,dt,isl)
        w.writerow([gpu,model,tp,prec,'prefill_ms_batch1',f'isl={isl}',f'{v:.3f}',round(isl/v*1e3)])
    for B in [1,8,32,64,128,256]:
        for ctx in [1024,4096]:
            v=decode(gpu,model,tp,dt,B,ctx)
            w.writerow([gpu,model,tp,prec,'decode_step_ms',f'batch={B},ctx={ctx}',f'{v:.3f}',round(B/v*1e3)])
