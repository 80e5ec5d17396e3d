"""Tutorial-style PyTorch programs, as people write them, for ``gradtrace.record()``'s tests.

Each is source text run twice by test_record.py (``run_program``): plainly, and inside ``with
gradtrace.record() as rec:``. Each seeds torch first, so both runs draw the same numbers.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from typing import Any

import numpy as np
import torch
from torch import nn

import gradtrace


def run_program(source: str, recorded: bool) -> tuple[dict[str, Any], str]:
    """The program run in a fresh namespace (a notebook cell, exec'd): plainly, or as the
    body of ``with gradtrace.record() as rec:``. Its namespace and what it printed."""
    namespace: dict[str, Any] = {"torch": torch, "nn": nn, "gradtrace": gradtrace}
    if recorded:
        source = "with gradtrace.record() as rec:\n" + textwrap.indent(source, "    ")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, "<program>", "exec"), namespace)
    return namespace, printed.getvalue()


def named_leaves(namespace: dict[str, Any]) -> dict[str, torch.Tensor]:
    """What record() names in a finished program's namespace: every parameter by its path
    under the variable holding its (outermost) model, every other leaf that requires grad by
    its variable; one level inside a list, tuple or dict a variable holds, by the member's
    place there (``models[0].fc.weight``, ``params["w"]``: a model there by that place, even
    when a variable holds it too)."""
    variables = {n: v for n, v in namespace.items() if not n.startswith("_")}
    members: dict[str, Any] = {}
    for name, value in variables.items():
        if isinstance(value, dict):
            members.update({f'{name}["{k}"]': item for k, item in value.items() if isinstance(k, str)})
        elif isinstance(value, (list, tuple)):
            members.update({f"{name}[{i}]": item for i, item in enumerate(value)})
    held = {id(m): path for path, m in members.items() if isinstance(m, nn.Module)}
    models = {held.get(id(m), n): m for n, m in variables.items() if isinstance(m, nn.Module)}
    models.update({path: m for path, m in members.items() if isinstance(m, nn.Module)})
    inner = {id(sub) for m in models.values() for sub in m.modules() if sub is not m}
    named: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, model in models.items():
        if id(model) in inner:
            continue
        for path, param in model.named_parameters():
            seen.add(id(param))
            named[f"{name}.{path}"] = param
    for name, value in {**variables, **members}.items():
        if (
            isinstance(value, torch.Tensor)
            and value.is_leaf
            and value.requires_grad
            and id(value) not in seen
        ):
            named[name] = value
    return named


def recorded_as_plain(source: str) -> dict[str, Any]:
    """The program run plainly and inside ``record()``: asserts that it printed the same, that
    its named leaves' final ``.grad`` (in ``rec.trace.grads`` and on the tensors) and values
    (the weights after any optimizer step) are bit-equal to the plain run's, that each
    backward is a pass and each event inside the pass it names, and that the trace
    serialises. The recorded run's namespace (``rec`` in it)."""
    source = textwrap.dedent(source)
    plain, plain_printed = run_program(source, recorded=False)
    recorded, recorded_printed = run_program(source, recorded=True)
    trace = recorded["rec"].trace
    assert recorded_printed == plain_printed
    expected = named_leaves(plain)
    after = named_leaves(recorded)
    assert set(after) == set(expected)
    assert set(expected) <= set(trace.grads), sorted(set(expected) - set(trace.grads))
    for name, leaf in expected.items():
        # the weights after the program (optimizer steps included), and the final gradients
        assert torch.equal(after[name].detach(), leaf.detach()), name
        if leaf.grad is None:
            assert trace.grads[name] is None, name
        else:
            grad = leaf.grad.to_dense() if leaf.grad.is_sparse else leaf.grad  # (grads: dense)
            assert torch.equal(torch.from_numpy(np.asarray(trace.grads[name])), grad), name
            assert torch.equal(after[name].grad.to_dense(), grad), name
    # every backward() and autograd.grad of the program is a pass of its own (inside an
    # optimizer's step, LBFGS's closure's: nested in the step's pass)
    backwards = [p for p in trace.doc.passes if p.phase == "backward"]
    assert backwards, "no backward pass recorded"
    assert trace.doc.source == "program"
    for event in trace.doc.events:  # every event inside the pass it names
        within = trace.doc.passes[event.pass_index]
        assert within.first_seq <= event.seq <= within.last_seq, (event.seq, event.kind, within.label)
    trace.to_json_bytes()  # (serialises)
    return recorded


AUTOGRAD_TUTORIAL = """
torch.manual_seed(0)
x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = torch.randn(5, 3, requires_grad=True)
b = torch.randn(3, requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
loss.backward()
print(w.grad)
print(b.grad)
"""

QUICKSTART = """
torch.manual_seed(0)

class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits

model = NeuralNetwork()
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
X = torch.rand(8, 1, 28, 28)
labels = torch.randint(0, 10, (8,))
model.train()
for batch in range(2):
    pred = model(X)
    loss = loss_fn(pred, labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
pred = model(X)
loss = loss_fn(pred, labels)
loss.backward()
"""

CIFAR_CNN = """
torch.manual_seed(0)
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x

net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
inputs = torch.randn(4, 3, 32, 32)
labels = torch.tensor([1, 0, 7, 3])
for i in range(2):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
"""

CHAR_RNN = """
torch.manual_seed(0)

class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        hidden = torch.tanh(self.i2h(input) + self.h2h(hidden))
        output = self.h2o(hidden)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)

n_letters = 57
rnn = RNN(n_letters, 16, 18)
criterion = nn.NLLLoss()
line_tensor = torch.zeros(5, 1, n_letters)
for li, letter in enumerate([3, 9, 14, 1, 22]):
    line_tensor[li][0][letter] = 1
category_tensor = torch.tensor([4])
hidden = rnn.initHidden()
rnn.zero_grad()
for i in range(line_tensor.size()[0]):
    output, hidden = rnn(line_tensor[i], hidden)
loss = criterion(output, category_tensor)
loss.backward()
for p in rnn.parameters():
    p.data.add_(p.grad.data, alpha=-0.005)
"""

LSTM_TAGGER = """
torch.manual_seed(0)
import torch.nn.functional as F

class LSTMTagger(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim)
        self.hidden2tag = nn.Linear(hidden_dim, tagset_size)

    def forward(self, sentence):
        embeds = self.word_embeddings(sentence)
        lstm_out, _ = self.lstm(embeds.view(len(sentence), 1, -1))
        tag_space = self.hidden2tag(lstm_out.view(len(sentence), -1))
        tag_scores = F.log_softmax(tag_space, dim=1)
        return tag_scores

model = LSTMTagger(6, 6, 9, 3)
loss_function = nn.NLLLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
training_data = [
    (torch.tensor([0, 1, 2, 3, 4]), torch.tensor([0, 1, 2, 0, 1])),
    (torch.tensor([5, 6, 7, 8]), torch.tensor([2, 1, 0, 2])),
]
for epoch in range(2):
    for sentence_in, targets in training_data:
        model.zero_grad()
        tag_scores = model(sentence_in)
        loss = loss_function(tag_scores, targets)
        loss.backward()
        optimizer.step()
"""

NANOGPT_BLOCK = """
torch.manual_seed(0)
import math
import torch.nn.functional as F

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x

wte = nn.Embedding(50, 16)
block = Block(16, 2, 8)
head = nn.Linear(16, 50, bias=False)
idx = torch.randint(0, 50, (2, 8))
targets = torch.randint(0, 50, (2, 8))
logits = head(block(wte(idx)))
loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
loss.backward()
"""

RESNET_BLOCK = """
torch.manual_seed(0)

class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out

down = nn.Sequential(nn.Conv2d(4, 8, 1, 2, bias=False), nn.BatchNorm2d(8))
block = BasicBlock(4, 8, 2, down)
optimizer = torch.optim.SGD(block.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
images = torch.randn(2, 4, 8, 8)
for step in range(2):
    optimizer.zero_grad()
    out = block(images)
    loss = out.pow(2).mean()
    loss.backward()
    optimizer.step()
"""

ADAM_REGRESSION = """
torch.manual_seed(0)
X = torch.randn(32, 3)
true_w = torch.tensor([[2.0], [-1.0], [0.5]])
Y = X @ true_w + 0.1 * torch.randn(32, 1)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
losses = []
for epoch in range(3):
    for start in range(0, 32, 16):
        xb, yb = X[start:start + 16], Y[start:start + 16]
        pred = model(xb)
        loss = loss_fn(pred, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    losses.append(loss.item())
"""

EMBEDDING_BAG = """
torch.manual_seed(0)

class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)

model = TextClassificationModel(30, 8, 4)
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=5)
text = torch.tensor([1, 5, 7, 2, 9, 11, 4, 3, 3, 28])
offsets = torch.tensor([0, 3, 6])
label = torch.tensor([2, 0, 3])
optimizer.zero_grad()
predicted_label = model(text, offsets)
loss = criterion(predicted_label, label)
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
optimizer.step()
"""

SEED_TENSOR_HOOKS = """
w = torch.nn.Parameter(torch.tensor(1.0))

def hook1(grad):
    print("register_hook:", grad)

def hook2(p):
    print("post_accumulate:", p.grad)

handle_1 = w.register_hook(hook1)
handle_2 = w.register_post_accumulate_grad_hook(hook2)

y1 = w * 2 # w gets a gradient of 2

# retain_graph=True is needed to allow multiple backward calls on the same graph
y1.backward(retain_graph=True)

y2 = w * 3 # w gets an additional gradient of 3, total should be 5
y2.backward()

# cleanup
handle_1.remove()
handle_2.remove()
"""

HOOKS_THAT_STORE = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
activations = {}
grads_seen = []

def save_output(name):
    def hook(module, inputs, output):
        activations[name] = output.detach()
    return hook

def double(grad):
    grads_seen.append(grad.clone())
    return grad * 2

model[0].register_forward_hook(save_output("fc1"))
model[2].register_full_backward_hook(lambda m, gi, go: print("backward of", type(m).__name__))
x = torch.randn(3, 4, requires_grad=True)
h = model[0](x)
h.register_hook(double)
out = model[2](model[1](h))
loss = out.sum()
loss.backward()
"""

RETAIN_GRAPH_AND_GRAD = """
x = torch.tensor(1.0, requires_grad=True)
y = x ** 2
y.backward(retain_graph=True)
print(x.grad)   # 2.0
y.backward()
print(x.grad)   # 4.0 (gradients accumulate)
torch.manual_seed(0)
a = torch.randn(3, requires_grad=True)
q = (a.sin() * a).sum()
(ga,) = torch.autograd.grad(q, a, create_graph=True)
penalty = (ga ** 2).sum()
penalty.backward()
"""

# ---- more programs as PyTorch's tutorials and common practice write them ----------------

POLYNOMIAL_TENSORS = """
torch.manual_seed(0)
import math

dtype = torch.float
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 200, device=device, dtype=dtype)
y = torch.sin(x)
a = torch.randn((), device=device, dtype=dtype, requires_grad=True)
b = torch.randn((), device=device, dtype=dtype, requires_grad=True)
c = torch.randn((), device=device, dtype=dtype, requires_grad=True)
d = torch.randn((), device=device, dtype=dtype, requires_grad=True)
learning_rate = 1e-6
for t in range(3):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    print(t, loss.item())
    loss.backward()
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None
print(f"Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")
"""


LEGENDRE_FUNCTION = """
torch.manual_seed(0)
import math

class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)

dtype = torch.float
x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
y = torch.sin(x)
a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
learning_rate = 5e-6
for t in range(3):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    print(t, loss.item())
    loss.backward()
    with torch.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None
y_pred = a + b * P3(c + d * x)
loss = (y_pred - y).pow(2).sum()
loss.backward()
"""


POLYNOMIAL_RMSPROP = """
torch.manual_seed(0)
import math

x = torch.linspace(-math.pi, math.pi, 200)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)
model = torch.nn.Sequential(
    torch.nn.Linear(3, 1),
    torch.nn.Flatten(0, 1)
)
loss_fn = torch.nn.MSELoss(reduction="sum")
learning_rate = 1e-3
optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
for t in range(3):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    print(t, loss.item())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
linear_layer = model[0]
print(f"Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x")
"""


POLYNOMIAL_NN_MANUAL = """
torch.manual_seed(0)
import math

x = torch.linspace(-math.pi, math.pi, 200)
y = torch.sin(x)
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)
model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
loss_fn = torch.nn.MSELoss(reduction="sum")
learning_rate = 1e-6
for t in range(3):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad
"""


DYNAMIC_NET = """
import random
import math
random.seed(0)
torch.manual_seed(0)

class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))
        self.e = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y

    def string(self):
        return f"y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3 + {self.e.item()} x^4 ? + {self.e.item()} x^5 ?"

x = torch.linspace(-math.pi, math.pi, 200)
y = torch.sin(x)
model = DynamicNet()
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(4):
    y_pred = model(x)
    loss = criterion(y_pred, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(f"Result: {model.string()}")
"""


LENET = """
torch.manual_seed(0)
import torch.nn.functional as F
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, input):
        c1 = F.relu(self.conv1(input))
        s2 = F.max_pool2d(c1, (2, 2))
        c3 = F.relu(self.conv2(s2))
        s4 = F.max_pool2d(c3, 2)
        s4 = torch.flatten(s4, 1)
        f5 = F.relu(self.fc1(s4))
        f6 = F.relu(self.fc2(f5))
        output = self.fc3(f6)
        return output

net = Net()
print(net)
params = list(net.parameters())
print(len(params))
print(params[0].size())
input = torch.randn(1, 1, 32, 32)
out = net(input)
print(out)
net.zero_grad()
out.backward(torch.randn(1, 10))

output = net(input)
target = torch.randn(10)
target = target.view(1, -1)
criterion = nn.MSELoss()
loss = criterion(output, target)
print(loss)
print(loss.grad_fn.name())
print(loss.grad_fn.next_functions[0][0].name())
net.zero_grad()
print("conv1.bias.grad before backward")
print(net.conv1.bias.grad)
loss.backward()
print("conv1.bias.grad after backward")
print(net.conv1.bias.grad)

learning_rate = 0.01
for f in net.parameters():
    f.data.sub_(f.grad.data * learning_rate)

optimizer = optim.SGD(net.parameters(), lr=0.01)
optimizer.zero_grad()
output = net(input)
loss = criterion(output, target)
loss.backward()
optimizer.step()
"""


DCGAN = """
torch.manual_seed(0)
import torch.optim as optim

nc, nz, ngf, ndf = 1, 4, 4, 4

def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)

class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh()
        )

    def forward(self, input):
        return self.main(input)

class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        return self.main(input)

netG = Generator()
netG.apply(weights_init)
netD = Discriminator()
netD.apply(weights_init)
criterion = nn.BCELoss()
fixed_noise = torch.randn(4, nz, 1, 1)
real_label = 1.
fake_label = 0.
optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
dataloader = [(torch.rand(3, nc, 8, 8) * 2 - 1, torch.zeros(3)) for _ in range(2)]
G_losses = []
D_losses = []
for i, data in enumerate(dataloader, 0):
    netD.zero_grad()
    real_cpu = data[0]
    b_size = real_cpu.size(0)
    label = torch.full((b_size,), real_label, dtype=torch.float)
    output = netD(real_cpu).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    D_x = output.mean().item()
    noise = torch.randn(b_size, nz, 1, 1)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    D_G_z1 = output.mean().item()
    errD = errD_real + errD_fake
    optimizerD.step()

    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    D_G_z2 = output.mean().item()
    optimizerG.step()
    print(f"Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")
    G_losses.append(errG.item())
    D_losses.append(errD.item())
with torch.no_grad():
    fake = netG(fixed_noise).detach()
"""


SEQ2SEQ = """
torch.manual_seed(0)
import torch.nn.functional as F
from torch import optim

SOS_token = 0

class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size, dropout_p=0.1):
        super(EncoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input):
        embedded = self.dropout(self.embedding(input))
        output, hidden = self.gru(embedded)
        return output, hidden

class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super(DecoderRNN, self).__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        output = self.embedding(input)
        output = F.relu(output)
        output, hidden = self.gru(output, hidden)
        output = self.out(output)
        return output, hidden

encoder = EncoderRNN(10, 8)
decoder = DecoderRNN(8, 12)
learning_rate = 0.01
encoder_optimizer = optim.SGD(encoder.parameters(), lr=learning_rate)
decoder_optimizer = optim.SGD(decoder.parameters(), lr=learning_rate)
criterion = nn.NLLLoss()
pairs = [(torch.tensor([[1, 4, 6, 2]]), torch.tensor([[3, 5, 2]])),
         (torch.tensor([[7, 3, 2]]), torch.tensor([[9, 1, 11, 2]]))]

def train(input_tensor, target_tensor):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    encoder_outputs, encoder_hidden = encoder(input_tensor)
    target_length = target_tensor.size(1)
    loss = 0
    decoder_input = torch.tensor([[SOS_token]])
    decoder_hidden = encoder_hidden
    for di in range(target_length):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden)
        log_probs = F.log_softmax(decoder_output.squeeze(1), dim=-1)
        loss += criterion(log_probs, target_tensor[:, di])
        decoder_input = target_tensor[:, di].unsqueeze(1)  # Teacher forcing
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_length

for input_tensor, target_tensor in pairs:
    print(train(input_tensor, target_tensor))
"""


DQN = """
torch.manual_seed(0)
import torch.nn.functional as F
import torch.optim as optim

BATCH_SIZE = 8
GAMMA = 0.99
TAU = 0.005
LR = 1e-4

class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super(DQN, self).__init__()
        self.layer1 = nn.Linear(n_observations, 16)
        self.layer2 = nn.Linear(16, 16)
        self.layer3 = nn.Linear(16, n_actions)

    def forward(self, x):
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        return self.layer3(x)

policy_net = DQN(4, 2)
target_net = DQN(4, 2)
target_net.load_state_dict(policy_net.state_dict())
optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)

def optimize_model(state_batch, action_batch, reward_batch, non_final_mask, non_final_next_states):
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 0.05)
    optimizer.step()

for i_episode in range(2):
    state_batch = torch.randn(BATCH_SIZE, 4)
    action_batch = torch.randint(0, 2, (BATCH_SIZE, 1))
    reward_batch = torch.randn(BATCH_SIZE)
    non_final_mask = torch.tensor([True, True, False, True, True, True, False, True])
    non_final_next_states = torch.randn(int(non_final_mask.sum()), 4)
    optimize_model(state_batch, action_batch, reward_batch, non_final_mask, non_final_next_states)
    target_net_state_dict = target_net.state_dict()
    policy_net_state_dict = policy_net.state_dict()
    for key in policy_net_state_dict:
        target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
    target_net.load_state_dict(target_net_state_dict)
"""


GRADIENT_ACCUMULATION = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
micro_batches = [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(6)]
accumulation_steps = 4
optimizer.zero_grad()
for i, (inputs, labels) in enumerate(micro_batches):
    outputs = model(inputs)
    loss = loss_fn(outputs, labels)
    loss = loss / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        print(f"step {i + 1}: grad norm {total_norm.item():.6f}")
        optimizer.step()
        optimizer.zero_grad()
"""


AUTOCAST_BF16 = """
torch.manual_seed(0)
import torch.nn.functional as F
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(6, 8)
y = torch.randint(0, 4, (6,))
for step in range(2):
    optimizer.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        output = model(x)
        assert output.dtype is torch.bfloat16
        loss = F.cross_entropy(output, y)
    loss.backward()
    optimizer.step()
    print(loss.dtype, output.dtype)
"""


CHECKPOINT = """
torch.manual_seed(0)
from torch.utils.checkpoint import checkpoint

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block1 = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.25), nn.Linear(12, 12))
        self.block2 = nn.Sequential(nn.Linear(12, 12), nn.Tanh())
        self.head = nn.Linear(12, 2)

    def forward(self, x):
        h = checkpoint(self.block1, x, use_reentrant=False)
        h = checkpoint(self.block2, h, use_reentrant=False)
        return self.head(h)

model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(5, 6)
target = torch.randn(5, 2)
for step in range(2):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
"""


HESSIAN_VECTOR = """
torch.manual_seed(0)
import warnings
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
x = torch.randn(4, 3)
y = torch.randn(4, 1)
params = [p for p in model.parameters()]
loss = nn.functional.mse_loss(model(x), y)
grads = torch.autograd.grad(loss, params, create_graph=True)
v = [torch.randn_like(p) for p in params]
gv = sum((g * vi).sum() for g, vi in zip(grads, v))
hv = torch.autograd.grad(gv, params)

loss = nn.functional.mse_loss(model(x), y)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # (create_graph=True with backward(): a reference cycle)
    loss.backward(create_graph=True)
grad_norm = sum(p.grad.pow(2).sum() for p in model.parameters())
model.zero_grad()
grad_norm.backward()
"""


SPATIAL_TRANSFORMER = """
torch.manual_seed(0)
import torch.nn.functional as F
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.fc1 = nn.Linear(4 * 5 * 5, 10)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
        )
        self.fc_loc = nn.Sequential(
            nn.Linear(4 * 4 * 4, 8),
            nn.ReLU(True),
            nn.Linear(8, 3 * 2)
        )
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 4 * 4 * 4)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        return x

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = x.view(-1, 4 * 5 * 5)
        x = self.fc1(x)
        return F.log_softmax(x, dim=1)

model = Net()
optimizer = optim.SGD(model.parameters(), lr=0.01)
data = torch.randn(3, 1, 12, 12)
target = torch.tensor([1, 7, 3])
model.train()
for batch_idx in range(2):
    optimizer.zero_grad()
    output = model(data)
    loss = F.nll_loss(output, target)
    loss.backward()
    optimizer.step()
"""


WEIGHT_TIED_LM = """
torch.manual_seed(0)
import torch.nn.functional as F

class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, tie_weights=True):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))

def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)

def get_batch(source, i, bptt=4):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target

ntokens = 20
model = RNNModel(ntokens, 8, 8, 2)
criterion = nn.NLLLoss()
train_data = torch.randint(0, ntokens, (9, 2))
lr = 20
model.train()
hidden = model.init_hidden(2)
for batch, i in enumerate(range(0, train_data.size(0) - 1, 4)):
    data, targets = get_batch(train_data, i)
    model.zero_grad()
    hidden = repackage_hidden(hidden)
    output, hidden = model(data, hidden)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
"""


MULTIHEAD_ATTENTION = """
torch.manual_seed(0)
embed_dim, num_heads = 8, 2
multihead_attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
query = torch.randn(2, 5, embed_dim, requires_grad=True)
key_padding_mask = torch.tensor([[False, False, False, False, False],
                                 [False, False, False, True, True]])
attn_output, attn_output_weights = multihead_attn(query, query, query, key_padding_mask=key_padding_mask)
loss = attn_output.pow(2).mean() + attn_output_weights.sum()
loss.backward()
encoder_layer = nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads, dim_feedforward=16, batch_first=True)
src = torch.randn(2, 5, embed_dim)
out = encoder_layer(src, src_key_padding_mask=key_padding_mask)
out.sum().backward()
"""


DATALOADER_LOOP = """
torch.manual_seed(0)
from torch.utils.data import DataLoader, TensorDataset

X = torch.randn(16, 5)
Y = torch.randint(0, 2, (16,))
dataset = TensorDataset(X, Y)
train_dataloader = DataLoader(dataset, batch_size=8, shuffle=True)
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-1)

def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss, current = loss.item(), batch * 8 + len(X)
        print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")

def test_loop(dataloader, model, loss_fn):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    print(f"Accuracy: {100 * correct / len(dataloader.dataset):>0.1f}%, Avg loss: {test_loss / len(dataloader):>8f}")

for t in range(2):
    print(f"Epoch {t + 1}")
    train_loop(train_dataloader, model, loss_fn, optimizer)
    test_loop(train_dataloader, model, loss_fn)
"""


PER_SAMPLE_GRADS = """
torch.manual_seed(0)
import torch.nn.functional as F
from torch.func import functional_call, vmap, grad

model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
data = torch.randn(5, 4)
targets = torch.randint(0, 3, (5,))
params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}

def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    loss = F.cross_entropy(predictions, targets)
    return loss

ft_compute_grad = grad(compute_loss)
ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)

loss = F.cross_entropy(model(data), targets, reduction="sum")
loss.backward()
for name, p in model.named_parameters():
    assert torch.allclose(ft_per_sample_grads[name].sum(0), p.grad, atol=1e-6), name
"""


PACKED_LSTM = """
torch.manual_seed(0)
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(12, 5, padding_idx=0)
        self.lstm = nn.LSTM(5, 6, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, text, text_lengths):
        embedded = self.embedding(text)
        packed = pack_padded_sequence(embedded, text_lengths, batch_first=True, enforce_sorted=False)
        packed_output, (hidden, cell) = self.lstm(packed)
        output, output_lengths = pad_packed_sequence(packed_output, batch_first=True)
        hidden = torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1)
        return self.fc(hidden)

model = Classifier()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters())
text = torch.tensor([[3, 5, 7, 2], [4, 9, 0, 0], [11, 1, 6, 0]])
text_lengths = torch.tensor([4, 2, 3])
labels = torch.tensor([0, 2, 1])
optimizer.zero_grad()
predictions = model(text, text_lengths)
loss = criterion(predictions, labels)
loss.backward()
optimizer.step()
"""


LBFGS_CLOSURE = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 6), nn.Tanh(), nn.Linear(6, 1))
x = torch.randn(10, 2)
y = (x[:, :1] * 0.5 - x[:, 1:] ** 2)
loss_fn = nn.MSELoss()
optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)

def closure():
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    return loss

for step in range(2):
    loss = optimizer.step(closure)
    print(step, f"{loss.item():.6f}")
"""


GRAD_SCALER = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
x = torch.randn(4, 8)
y = torch.randint(0, 2, (4,))
for step in range(2):
    optimizer.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    print(scaler.get_scale())
"""


WGAN_GP = """
torch.manual_seed(0)
critic = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
generator = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 4))
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.0, 0.9))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.0, 0.9))
lambda_gp = 10

def compute_gradient_penalty(D, real_samples, fake_samples):
    alpha = torch.rand(real_samples.size(0), 1)
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.size(0), 1)
    gradients = torch.autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()

for i in range(2):
    real = torch.randn(6, 4)
    z = torch.randn(6, 3)
    opt_c.zero_grad()
    fake_imgs = generator(z)
    gradient_penalty = compute_gradient_penalty(critic, real.data, fake_imgs.data)
    d_loss = -torch.mean(critic(real)) + torch.mean(critic(fake_imgs)) + lambda_gp * gradient_penalty
    d_loss.backward()
    opt_c.step()
    opt_g.zero_grad()
    fake_imgs = generator(z)
    g_loss = -torch.mean(critic(fake_imgs))
    g_loss.backward()
    opt_g.step()
"""


VAE = """
torch.manual_seed(0)
import torch.nn.functional as F

class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(16, 8)
        self.fc21 = nn.Linear(8, 2)
        self.fc22 = nn.Linear(8, 2)
        self.fc3 = nn.Linear(2, 8)
        self.fc4 = nn.Linear(8, 16)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 16))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar

def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 16), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD

model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.rand(5, 1, 4, 4)
model.train()
train_loss = 0
for batch_idx in range(2):
    optimizer.zero_grad()
    recon_batch, mu, logvar = model(data)
    loss = loss_function(recon_batch, data, mu, logvar)
    loss.backward()
    train_loss += loss.item()
    optimizer.step()
print(f"{train_loss / 10:.4f}")
"""


SPARSE_EMBEDDING = """
torch.manual_seed(0)
embedding = nn.Embedding(20, 4, sparse=True)
linear = nn.Linear(4, 1)
sparse_opt = torch.optim.SparseAdam(list(embedding.parameters()), lr=0.01)
dense_opt = torch.optim.Adam(linear.parameters(), lr=0.01)
idx = torch.tensor([[1, 4, 4, 9], [2, 3, 19, 0]])
target = torch.randn(2, 4, 1)
for step in range(2):
    sparse_opt.zero_grad()
    dense_opt.zero_grad()
    loss = nn.functional.mse_loss(linear(embedding(idx)), target)
    loss.backward()
    sparse_opt.step()
    dense_opt.step()
loss = nn.functional.mse_loss(linear(embedding(idx)), target)
loss.backward()
"""


PARAM_GROUPS_ONECYCLE = """
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(6, 10), nn.GELU(), nn.LayerNorm(10))
        self.classifier = nn.Linear(10, 3)

    def forward(self, x):
        return self.classifier(self.backbone(x))

model = Net()
optimizer = torch.optim.AdamW([
    {"params": model.backbone.parameters(), "lr": 1e-4},
    {"params": model.classifier.parameters()},
], lr=1e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=[1e-3, 1e-2], total_steps=5)
x = torch.randn(8, 6)
y = torch.randint(0, 3, (8,))
for step in range(3):
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y, label_smoothing=0.1)
    loss.backward()
    optimizer.step()
    scheduler.step()
    print([f"{g['lr']:.6f}" for g in optimizer.param_groups])
"""


GRAD_CLAMP_HOOKS = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 1))
for p in model.parameters():
    p.register_hook(lambda grad: torch.clamp(grad, -0.1, 0.1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
x = torch.randn(4, 5)
y = torch.randn(4, 1)
for step in range(2):
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
"""


DISTILLATION = """
torch.manual_seed(0)
import torch.nn.functional as F
teacher = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4))
student = nn.Sequential(nn.Linear(6, 4))
teacher.eval()
optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
T = 2.0
soft_target_loss_weight, ce_loss_weight = 0.25, 0.75
inputs = torch.randn(5, 6)
labels = torch.randint(0, 4, (5,))
for epoch in range(2):
    optimizer.zero_grad()
    with torch.no_grad():
        teacher_logits = teacher(inputs)
    student_logits = student(inputs)
    soft_targets = F.softmax(teacher_logits / T, dim=-1)
    soft_prob = F.log_softmax(student_logits / T, dim=-1)
    soft_targets_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T ** 2)
    label_loss = nn.CrossEntropyLoss()(student_logits, labels)
    loss = soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss
    loss.backward()
    optimizer.step()
"""


FUNCTIONAL_JACOBIAN = """
torch.manual_seed(0)
from torch.autograd.functional import jacobian, hessian, vjp

def exp_reducer(x):
    return x.exp().sum(dim=1)

inputs = torch.rand(2, 2)
J = jacobian(exp_reducer, inputs)
print(J.shape)

def pow_reducer(x):
    return x.pow(3).sum()

H = hessian(pow_reducer, torch.rand(2, 2))
v = torch.ones(2)
out, vjp_out = vjp(exp_reducer, inputs, v)
w = torch.randn(3, requires_grad=True)
total = (J.sum() + H.sum()) * w.sum()
total.backward()
"""


LEAF_INPLACE_ERROR = """
w = torch.ones(3, requires_grad=True)
try:
    w.add_(1)
except RuntimeError as e:
    print("refused:", e)
y = (w * 2).sum()
y.backward()
"""


RETAIN_GRAD_INTERMEDIATE = """
torch.manual_seed(0)
x = torch.randn(3, requires_grad=True)
h = x * 2
h.retain_grad()
out = (h ** 2).sum()
out.backward()
print(h.grad)
print(x.grad)
"""


WEIGHT_NORM = """
torch.manual_seed(0)
from torch.nn.utils.parametrizations import weight_norm, spectral_norm
model = nn.Sequential(weight_norm(nn.Linear(4, 6)), nn.ReLU(), spectral_norm(nn.Linear(6, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(3, 4)
for step in range(2):
    optimizer.zero_grad()
    loss = model(x).pow(2).sum()
    loss.backward()
    optimizer.step()
"""


CNN_SIZED_IN_INIT = """
torch.manual_seed(0)
import torch.nn.functional as F
import torch.optim as optim

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 8, 3)
        x = torch.randn(16, 16).view(-1, 1, 16, 16)
        self._to_linear = None
        self.convs(x)
        self.fc1 = nn.Linear(self._to_linear, 10)
        self.fc2 = nn.Linear(10, 2)

    def convs(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), (2, 2))
        if self._to_linear is None:
            self._to_linear = x[0].shape[0] * x[0].shape[1] * x[0].shape[2]
        return x

    def forward(self, x):
        x = self.convs(x)
        x = x.view(-1, self._to_linear)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return F.softmax(x, dim=1)

net = Net()
optimizer = optim.Adam(net.parameters(), lr=0.001)
loss_function = nn.MSELoss()
train_X = torch.rand(6, 16, 16)
train_y = torch.eye(2)[torch.tensor([0, 1, 1, 0, 1, 0])]
BATCH_SIZE = 3
for i in range(0, len(train_X), BATCH_SIZE):
    batch_X = train_X[i:i + BATCH_SIZE].view(-1, 1, 16, 16)
    batch_y = train_y[i:i + BATCH_SIZE]
    net.zero_grad()
    outputs = net(batch_X)
    loss = loss_function(outputs, batch_y)
    loss.backward()
    optimizer.step()
"""


FGSM = """
torch.manual_seed(0)
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.fc1 = nn.Linear(4 * 5 * 5, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = x.view(-1, 4 * 5 * 5)
        return F.log_softmax(self.fc1(x), dim=1)

def fgsm_attack(image, epsilon, data_grad):
    sign_data_grad = data_grad.sign()
    perturbed_image = image + epsilon * sign_data_grad
    perturbed_image = torch.clamp(perturbed_image, 0, 1)
    return perturbed_image

model = Net()
model.eval()
epsilon = 0.1
correct = 0
test_loader = [(torch.rand(1, 1, 12, 12), torch.tensor([3])), (torch.rand(1, 1, 12, 12), torch.tensor([7]))]
for data, target in test_loader:
    data.requires_grad = True
    output = model(data)
    init_pred = output.max(1, keepdim=True)[1]
    loss = F.nll_loss(output, target)
    model.zero_grad()
    loss.backward()
    data_grad = data.grad.data
    perturbed_data = fgsm_attack(data, epsilon, data_grad)
    output = model(perturbed_data)
    final_pred = output.max(1, keepdim=True)[1]
    if final_pred.item() == target.item():
        correct += 1
print(correct)
"""


SALIENCY = """
torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5))
for param in model.parameters():
    param.requires_grad = False
model.eval()
img = torch.rand(1, 3, 8, 8)
img.requires_grad_()
scores = model(img)
score_max_index = scores.argmax()
score_max = scores[0, score_max_index]
score_max.backward()
saliency, _ = torch.max(img.grad.data.abs(), dim=1)
print(saliency.shape)
"""


INFERENCE_MODE_EVAL = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(6, 4)
y = torch.randint(0, 2, (6,))

@torch.inference_mode()
def evaluate(model, x, y):
    model.eval()
    logits = model(x)
    return (logits.argmax(1) == y).float().mean().item()

@torch.no_grad()
def evaluate_no_grad(model, x):
    return model(x).softmax(-1)

for epoch in range(2):
    model.train()
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    print(epoch, evaluate(model, x, y), evaluate_no_grad(model, x).shape)
"""


CHECKPOINT_REENTRANT = """
torch.manual_seed(0)
from torch.utils.checkpoint import checkpoint_sequential
model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
x = torch.randn(3, 5, requires_grad=True)
out = checkpoint_sequential(model, 2, x, use_reentrant=True)
loss = out.sum()
loss.backward()
"""


NN_TRANSFORMER = """
torch.manual_seed(0)
import math

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=50):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0)]
        return self.dropout(x)

class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers, dropout=0.1):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers, enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask=None):
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, src_mask)
        return self.linear(output)

ntokens = 30
model = TransformerModel(ntokens, 8, 2, 16, 2)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.95)
data = torch.randint(0, ntokens, (6, 2))
targets = torch.randint(0, ntokens, (6 * 2,))
model.train()
src_mask = nn.Transformer.generate_square_subsequent_mask(6)
output = model(data, src_mask)
loss = criterion(output.view(-1, ntokens), targets)
optimizer.zero_grad()
loss.backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
optimizer.step()
scheduler.step()
"""


HF_GPT2 = """
torch.manual_seed(0)
from transformers import GPT2Config, GPT2LMHeadModel
config = GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2)
model = GPT2LMHeadModel(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
input_ids = torch.randint(0, 50, (2, 8))
for step in range(2):
    outputs = model(input_ids, labels=input_ids)
    loss = outputs.loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
outputs = model(input_ids, labels=input_ids)
outputs.loss.backward()
"""


HF_BERT_CLASSIFIER = """
torch.manual_seed(0)
from transformers import BertConfig, BertForSequenceClassification
config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, max_position_embeddings=16, num_labels=3)
model = BertForSequenceClassification(config)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
input_ids = torch.randint(1, 40, (2, 6))
attention_mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
labels = torch.tensor([0, 2])
outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
outputs.loss.backward()
optimizer.step()
"""


REINFORCE = """
torch.manual_seed(0)
import torch.nn.functional as F
from torch.distributions import Categorical

class Policy(nn.Module):
    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(4, 16)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(16, 2)
        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)

policy = Policy()
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
eps = 1e-6
gamma = 0.99

def select_action(state):
    state = state.float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()

def finish_episode():
    R = 0
    policy_loss = []
    returns = []
    for r in policy.rewards[::-1]:
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss).sum()
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]

for i_episode in range(2):
    state = torch.randn(4)
    for t in range(4):
        action = select_action(state)
        state = state + 0.1 * (action - 0.5)
        policy.rewards.append(1.0 if action == 1 else 0.5)
    finish_episode()
"""


SWA = """
torch.manual_seed(0)
from torch.optim.swa_utils import AveragedModel, SWALR, get_ema_multi_avg_fn
model = nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
swa_model = AveragedModel(model)
ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
swa_scheduler = SWALR(optimizer, swa_lr=0.05)
loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)]
for epoch in range(2):
    for input, target in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(input), target).backward()
        optimizer.step()
        ema_model.update_parameters(model)
    swa_model.update_parameters(model)
    swa_scheduler.step()
torch.optim.swa_utils.update_bn(((x,) for x, _ in loader), swa_model)
preds = swa_model(loader[0][0])
ema_model.eval()
ema_preds = ema_model(loader[0][0])
"""


FUNCTION_SETUP_CONTEXT = """
torch.manual_seed(0)

class MyCube(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        result = x ** 3
        dx = 3 * x ** 2
        return result, dx

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        result, dx = output
        ctx.mark_non_differentiable(dx)
        ctx.save_for_backward(x, dx)

    @staticmethod
    def backward(ctx, grad_output, grad_dx):
        x, dx = ctx.saved_tensors
        return grad_output * dx

class Clamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lo):
        ctx.save_for_backward(x)
        ctx.lo = lo
        return x.clamp(min=lo)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (x > ctx.lo).to(grad.dtype), None

x = torch.randn(5, requires_grad=True)
y, dy = MyCube.apply(x)
z = Clamp.apply(y, 0.1)
loss = z.sum() + dy.sum().detach()
loss.backward()
per_sample = torch.func.vmap(torch.func.grad(lambda t: MyCube.apply(t)[0]))(x.detach())
"""


EMA_LERP = """
torch.manual_seed(0)
import copy
model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 1))
ema = copy.deepcopy(model).requires_grad_(False)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(6, 4), torch.randn(6, 1)
for step in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_ema, p in zip(ema.parameters(), model.parameters()):
            p_ema.lerp_(p, 0.1)
vec = torch.nn.utils.parameters_to_vector(model.parameters())
torch.nn.utils.vector_to_parameters(vec * 0.5, ema.parameters())
"""


DETECT_ANOMALY = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
x = torch.randn(5, 3)
with torch.autograd.detect_anomaly():
    loss = model(x).pow(2).mean()
    loss.backward()
"""


PROFILER = """
torch.manual_seed(0)
from torch.profiler import profile, record_function, ProfilerActivity
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
x = torch.randn(5, 3)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with record_function("model_inference"):
        loss = model(x).sum()
    loss.backward()
names = {e.key for e in prof.key_averages()}
print("model_inference" in names)
"""


DOUBLE_MODEL_FLOAT64 = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.Softplus(), nn.Linear(4, 1)).double()
x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
loss = model(x).sum()
(gx,) = torch.autograd.grad(loss, x, create_graph=True)
penalty = gx.pow(2).sum()
(loss + penalty).backward()
"""


ENSEMBLE = """
torch.manual_seed(0)
import copy
import torch.nn.functional as F
from torch.func import stack_module_state, functional_call, vmap

class SimpleMLP(nn.Module):
    def __init__(self):
        super(SimpleMLP, self).__init__()
        self.fc1 = nn.Linear(6, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)

num_models = 3
models = [SimpleMLP() for _ in range(num_models)]
minibatch = torch.randn(4, 6)
predictions_diff_minibatch_loop = [model(minibatch) for model in models]
params, buffers = stack_module_state(models)
base_model = copy.deepcopy(models[0])
base_model = base_model.to("meta")

def fmodel(params, buffers, x):
    return functional_call(base_model, (params, buffers), (x,))

predictions = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
assert torch.allclose(predictions, torch.stack(predictions_diff_minibatch_loop), atol=1e-5)
loss = predictions.pow(2).mean()
loss.backward()
grad_fc1 = params["fc1.weight"].grad
"""


TRANSFER_LEARNING = """
torch.manual_seed(0)
import torch.optim as optim
from torch.optim import lr_scheduler
from torchvision import models

model_conv = models.resnet18(weights=None)
for param in model_conv.parameters():
    param.requires_grad = False
num_ftrs = model_conv.fc.in_features
model_conv.fc = nn.Linear(num_ftrs, 2)
criterion = nn.CrossEntropyLoss()
optimizer_conv = optim.SGD(model_conv.fc.parameters(), lr=0.001, momentum=0.9)
exp_lr_scheduler = lr_scheduler.StepLR(optimizer_conv, step_size=1, gamma=0.1)
inputs = torch.randn(2, 3, 32, 32)
labels = torch.tensor([0, 1])
for epoch in range(2):
    model_conv.train()
    optimizer_conv.zero_grad()
    with torch.set_grad_enabled(True):
        outputs = model_conv(inputs)
        _, preds = torch.max(outputs, 1)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer_conv.step()
    exp_lr_scheduler.step()
    print(epoch, exp_lr_scheduler.get_last_lr())
"""

HAND_DICT = """
torch.manual_seed(0)
params = {"w": torch.randn(3, 2, requires_grad=True), "b": torch.zeros(2, requires_grad=True)}
x, y = torch.randn(8, 3), torch.randn(8, 2)
lr = 0.1
for step in range(3):
    loss = ((x @ params["w"] + params["b"] - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in params.values():
            p.data -= lr * p.grad
            if step < 2:
                p.grad.zero_()
"""

ENSEMBLE_OPTIMIZERS = """
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x).tanh()

models = [Net(), Net()]
optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in models]
x, y = torch.randn(6, 4), torch.randn(6, 2)
for step in range(2):
    for model, optimizer in zip(models, optimizers):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
"""

TUPLE_UNPACKED = """
torch.manual_seed(0)
(w, b) = (torch.randn(3, requires_grad=True), torch.randn(1, requires_grad=True))
x = torch.randn(5, 3)
loss = (x @ w + b).pow(2).sum()
loss.backward()
"""

MODULELIST_IN_LIST = """
torch.manual_seed(0)
stacks = [nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 1)])]
x = torch.randn(4, 3)
h = x
for layer in stacks[0]:
    h = layer(h)
loss = h.pow(2).mean()
loss.backward()
"""

PROGRAMS = {
    "hand_dict": HAND_DICT,
    "ensemble_optimizers": ENSEMBLE_OPTIMIZERS,
    "tuple_unpacked": TUPLE_UNPACKED,
    "modulelist_in_list": MODULELIST_IN_LIST,
    "autograd_tutorial": AUTOGRAD_TUTORIAL,
    "quickstart": QUICKSTART,
    "cifar_cnn": CIFAR_CNN,
    "char_rnn": CHAR_RNN,
    "lstm_tagger": LSTM_TAGGER,
    "nanogpt_block": NANOGPT_BLOCK,
    "resnet_block": RESNET_BLOCK,
    "adam_regression": ADAM_REGRESSION,
    "embedding_bag": EMBEDDING_BAG,
    "seed_tensor_hooks": SEED_TENSOR_HOOKS,
    "hooks_that_store": HOOKS_THAT_STORE,
    "retain_graph_and_grad": RETAIN_GRAPH_AND_GRAD,
    "polynomial_tensors": POLYNOMIAL_TENSORS,
    "legendre_function": LEGENDRE_FUNCTION,
    "polynomial_rmsprop": POLYNOMIAL_RMSPROP,
    "polynomial_nn_manual": POLYNOMIAL_NN_MANUAL,
    "dynamic_net": DYNAMIC_NET,
    "lenet": LENET,
    "dcgan": DCGAN,
    "seq2seq": SEQ2SEQ,
    "dqn": DQN,
    "gradient_accumulation": GRADIENT_ACCUMULATION,
    "autocast_bf16": AUTOCAST_BF16,
    "checkpoint": CHECKPOINT,
    "hessian_vector": HESSIAN_VECTOR,
    "spatial_transformer": SPATIAL_TRANSFORMER,
    "weight_tied_lm": WEIGHT_TIED_LM,
    "multihead_attention": MULTIHEAD_ATTENTION,
    "dataloader_loop": DATALOADER_LOOP,
    "per_sample_grads": PER_SAMPLE_GRADS,
    "packed_lstm": PACKED_LSTM,
    "lbfgs_closure": LBFGS_CLOSURE,
    "grad_scaler": GRAD_SCALER,
    "wgan_gp": WGAN_GP,
    "vae": VAE,
    "sparse_embedding": SPARSE_EMBEDDING,
    "param_groups_onecycle": PARAM_GROUPS_ONECYCLE,
    "grad_clamp_hooks": GRAD_CLAMP_HOOKS,
    "distillation": DISTILLATION,
    "functional_jacobian": FUNCTIONAL_JACOBIAN,
    "leaf_inplace_error": LEAF_INPLACE_ERROR,
    "retain_grad_intermediate": RETAIN_GRAD_INTERMEDIATE,
    "weight_norm": WEIGHT_NORM,
    "cnn_sized_in_init": CNN_SIZED_IN_INIT,
    "fgsm": FGSM,
    "saliency": SALIENCY,
    "inference_mode_eval": INFERENCE_MODE_EVAL,
    "checkpoint_reentrant": CHECKPOINT_REENTRANT,
    "nn_transformer": NN_TRANSFORMER,
    "reinforce": REINFORCE,
    "swa": SWA,
    "function_setup_context": FUNCTION_SETUP_CONTEXT,
    "ema_lerp": EMA_LERP,
    "detect_anomaly": DETECT_ANOMALY,
    "profiler": PROFILER,
    "double_model_float64": DOUBLE_MODEL_FLOAT64,
}

# needs torchvision (its Python code: see third_party.torchvision_python_only)
TORCHVISION_PROGRAMS = {"transfer_learning": TRANSFER_LEARNING}

# need transformers (models built from configs: no download)
TRANSFORMERS_PROGRAMS = {"hf_gpt2": HF_GPT2, "hf_bert_classifier": HF_BERT_CLASSIFIER}
