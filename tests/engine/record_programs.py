"""Tutorial-style PyTorch programs, as people write them, for ``gradtrace.record()``'s tests.

Each is source text run twice by test_record.py: plainly, and inside ``with
gradtrace.record() as rec:``. Each seeds torch first, so both runs draw the same numbers.
"""

from __future__ import annotations

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

PROGRAMS = {
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
}
